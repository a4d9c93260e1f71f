"""Columns added to a table for new fields of its records, in a commit the ledger records.

`schema_evolution = "add_columns"` (docs/configuration.md#schema-evolution): before a batch's
data commit, the new fields it brings become nullable columns at the end of the table in one
metadata commit (ALTER TABLE ADD COLUMNS) that carries a ledger entry of kind `schema` for the
batch, so `history` shows when and for which batch the table grew. Two writers adding the same
column at once: one ALTER wins, the other fails and finds the column there, which is fine; a
column the other writer added with another type stays as it added it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tables.delta.commits import commit_session
from tables.delta.table import missing_columns
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
