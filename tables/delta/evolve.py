"""Columns added to a table for new fields of its records, in a commit the ledger records.

`schema_evolution = "add_columns"` (docs/configuration.md#schema-evolution): before a batch's
data commit, the new fields it brings become nullable columns at the end of the table in one
metadata commit (ALTER TABLE ADD COLUMNS) that carries a ledger entry of kind `schema` for the
batch, so `history` shows when and for which batch the table grew. Two writers adding the same
column at once: one ALTER wins, the other fails and finds the column there, which is fine; a
column the other writer added with another type stays as it added it.

`type_widening = true`: a column widens in place (ALTER COLUMN ... TYPE, Delta's `typeWidening`
feature, enabled on the table first) in a commit with the same kind of ledger entry; a type at
least as wide as the one asked for, by another writer's widening, is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
)

from tables.delta.commits import commit_session
from tables.delta.table import missing_columns, table_detail
from tables.engine.clones import SessionClones
from tables.identifiers import quote_identifier, validate_column_name, validate_table_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from tables.delta.ledger import CommitMetadata


def add_columns(
    spark: SparkSession,
    table: str,
    fields: StructType,
    meta: CommitMetadata,
    clones: SessionClones | None = None,
) -> list[str]:
    """Add the `fields` the table lacks as nullable columns in one commit; the ones added.

    A lost race (another writer added one of them first) is read again, not raised.
    """
    validate_table_name(table)
    for column in fields.fields:
        validate_column_name(column.name)
    missing = missing_columns(spark, table, list(fields.fields))
    if not missing:
        return []
    columns = ", ".join(f"{quote_identifier(f.name)} {f.dataType.simpleString()}" for f in missing)
    try:
        with commit_session(spark, clones or SessionClones(), meta) as clone:
            clone.sql(f"ALTER TABLE {quote_identifier(table)} ADD COLUMNS ({columns})")
    except Exception:
        if missing_columns(spark, table, list(fields.fields)):
            raise
        return []
    return [f.name for f in missing]


#: Integer types, narrowest first: the ladder a column widens along.
INTEGER_LADDER: tuple[DataType, ...] = (ByteType(), ShortType(), IntegerType(), LongType())
TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"


def is_at_least(current: DataType, wanted: DataType) -> bool:
    """True if a column of type `current` holds every value of type `wanted` (no widening)."""
    if current == wanted:
        return True
    if current in INTEGER_LADDER and wanted in INTEGER_LADDER:
        return INTEGER_LADDER.index(current) >= INTEGER_LADDER.index(wanted)
    if isinstance(current, DoubleType) and isinstance(wanted, FloatType):
        return True
    if isinstance(current, DecimalType) and isinstance(wanted, DecimalType):
        return current.scale == wanted.scale and current.precision >= wanted.precision
    return False


def table_types(spark: SparkSession, table: str, names: list[str]) -> dict[str, DataType]:
    """The table's current types of the named columns (those it has)."""
    wanted = {n.lower() for n in names}
    return {
        f.name: f.dataType for f in spark.table(table).schema.fields if f.name.lower() in wanted
    }


def widen_columns(
    spark: SparkSession,
    table: str,
    kinds: Mapping[str, DataType],
    meta: CommitMetadata,
    clones: SessionClones | None = None,
) -> list[str]:
    """Widen the named columns to `kinds` (those not at least as wide already); the ones widened.

    One commit per column (an ALTER COLUMN changes one), each with `meta` naming that column
    (`widened_columns`); the table's type widening is enabled first if it is off (a table made
    before the opt-in). A lost race (another writer widened first) is read again, not raised.
    """
    validate_table_name(table)
    for name in kinds:
        validate_column_name(name)

    def narrower() -> dict[str, DataType]:
        held = table_types(spark, table, list(kinds))
        return {n: k for n, k in kinds.items() if n in held and not is_at_least(held[n], k)}

    todo = narrower()
    if not todo:
        return []
    name = quote_identifier(table)
    statements: list[tuple[dict[str, Any], str]] = []
    if table_detail(spark, table).properties.get(TYPE_WIDENING_PROPERTY) != "true":
        enable = f"ALTER TABLE {name} SET TBLPROPERTIES ('{TYPE_WIDENING_PROPERTY}' = 'true')"
        statements.append(({"type_widening": "enabled"}, enable))
    for column, kind in todo.items():
        alter = f"ALTER TABLE {name} ALTER COLUMN {quote_identifier(column)} TYPE "
        statements.append(
            ({"widened_columns": {column: kind.simpleString()}}, alter + kind.simpleString())
        )
    try:
        for source, statement in statements:
            with commit_session(
                spark, clones or SessionClones(), replace(meta, source=source)
            ) as clone:
                clone.sql(statement)
    except Exception:
        if narrower():
            raise
        return []
    return list(todo)
