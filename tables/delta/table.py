"""Creating declared tables and registering them in the catalog, idempotently.

Creation is `CREATE TABLE IF NOT EXISTS ... USING delta` (SQL, so it works over Spark Connect
too), and two processes starting at once both end with one table. A table that already exists
is checked against its spec: a column that is missing or has another type is a
SchemaMismatchError, never a silent rewrite, except for the columns a spec marks as addable (the
rescued-data column, the quarantine's raw bytes): a table created before they existed gains them
with `ALTER TABLE ... ADD COLUMNS`, a metadata-only Delta commit that rewrites no data file.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tables.delta.warehouse import is_warehouse_catalog, register, table_location, warehouse_dir
from tables.errors import SchemaMismatchError, TableNotFoundError
from tables.identifiers import quote_identifier, sql_string_literal, validate_table_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField, StructType


@dataclass(frozen=True)
class TableDetail:
    """What `DESCRIBE DETAIL` says of a Delta table."""

    name: str
    location: str
    num_files: int
    size_bytes: int
    partition_columns: tuple[str, ...]
    properties: Mapping[str, str]
    created_at: Any
    last_modified: Any


def table_exists(spark: SparkSession, name: str) -> bool:
    """Return True if the catalog knows the table, or (embedded catalog) its warehouse holds it.

    In the embedded catalog another process may have created the table after this session
    started: its directory under the warehouse is found and registered here
    (`tables.delta.warehouse`).
    """
    if spark.catalog.tableExists(validate_table_name(name)):
        return True
    return is_warehouse_catalog(spark) and register(spark, name)


def require_table(spark: SparkSession, name: str) -> None:
    """Raise TableNotFoundError unless the table is in the catalog."""
    if not table_exists(spark, name):
        raise TableNotFoundError(f"table {name!r} not found in the catalog")


def schema_differences(expected: StructType, actual: StructType) -> list[str]:
    """Describe how `actual` falls short of `expected`: missing columns and changed types."""
    actual_types = {f.name.lower(): f.dataType for f in actual.fields}
    problems = []
    for column in expected.fields:
        found = actual_types.get(column.name.lower())
        if found is None:
            problems.append(f"missing column {column.name}")
        elif found != column.dataType:
            problems.append(
                f"column {column.name} is {found.simpleString()}, "
                f"spec says {column.dataType.simpleString()}"
            )
    return problems


def create_table(
    spark: SparkSession,
    name: str,
    schema: StructType,
    *,
    partition_by: tuple[str, ...] = (),
    properties: Mapping[str, str] | None = None,
    addable: tuple[str, ...] = (),
) -> bool:
    """Create a Delta table if absent and check an existing one; True if this call created it.

    An existing table that lacks one of the `addable` columns of `schema` gains it (appended at
    the end) instead of failing the check.
    """
    validate_table_name(name)
    if table_exists(spark, name):
        add_missing_columns(spark, name, schema, addable)
        _assert_matches(spark, name, schema)
        return False
    location = None
    if is_warehouse_catalog(spark):
        # An external table at the managed location: every process finds it there by name, and
        # no process trips over a "non-empty location" that another one filled.
        location = table_location(warehouse_dir(spark), name)
    statement = create_statement(name, schema, partition_by, properties or {}, location)
    try:
        spark.sql(statement)
    except Exception:
        # Another process or thread created it first (Delta reports the lost race for version 0
        # as a concurrent protocol or metadata change, or, while the winner's first commit is
        # still being written, as a non-empty location): the table exists, check it instead.
        # On a loaded machine the winner's first commit can take tens of seconds to appear.
        if not _appears(spark, name):
            raise
        _assert_matches(spark, name, schema)
        return False
    return True


def create_statement(
    name: str,
    schema: StructType,
    partition_by: tuple[str, ...],
    properties: Mapping[str, str],
    location: str | None,
) -> str:
    """The `CREATE TABLE IF NOT EXISTS ... USING delta` statement of a table (names quoted)."""
    columns = ", ".join(column_definition(field) for field in schema.fields)
    statement = f"CREATE TABLE IF NOT EXISTS {quote_identifier(name)} ({columns}) USING delta"
    if partition_by:
        statement += f" PARTITIONED BY ({', '.join(quote_identifier(c) for c in partition_by)})"
    if location is not None:
        statement += f" LOCATION {sql_string_literal(location)}"
    if properties:
        pairs = ", ".join(
            f"{sql_string_literal(k)} = {sql_string_literal(v)}" for k, v in properties.items()
        )
        statement += f" TBLPROPERTIES ({pairs})"
    return statement


def column_definition(field: StructField) -> str:
    """One column of a CREATE TABLE: quoted name, type, NOT NULL, comment."""
    text = f"{quote_identifier(field.name)} {field.dataType.simpleString()}"
    if not field.nullable:
        text += " NOT NULL"
    comment = field.metadata.get("comment")
    if comment:
        text += f" COMMENT {sql_string_literal(str(comment))}"
    return text


def _appears(spark: SparkSession, name: str, timeout: float = 60.0) -> bool:
    """True once `name` is in the catalog, polling for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not table_exists(spark, name):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def add_missing_columns(
    spark: SparkSession, name: str, schema: StructType, addable: tuple[str, ...]
) -> list[str]:
    """Add the `addable` columns of `schema` that the table lacks; return the ones added.

    Another process may add the same column at the same moment: its ALTER wins and ours fails
    (the column exists, or Delta reports a concurrent metadata change). Such a lost race is
    fine as long as the column is there afterwards, so the schema is read again before raising.
    """
    wanted = [f for f in schema.fields if f.name in addable]
    missing = missing_columns(spark, name, wanted)
    if not missing:
        return []
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
    try:
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({columns})")
    except Exception:
        if missing_columns(spark, name, wanted):
            raise
    return [f.name for f in missing]


def missing_columns(spark: SparkSession, name: str, fields: list[Any]) -> list[Any]:
    """The `fields` the table has no column for (in any case), read after a refresh."""
    spark.catalog.refreshTable(name)
    present = {f.name.lower() for f in spark.table(name).schema.fields}
    return [f for f in fields if f.name.lower() not in present]


def _assert_matches(spark: SparkSession, name: str, schema: StructType) -> None:
    problems = schema_differences(schema, spark.table(name).schema)
    if problems:
        raise SchemaMismatchError(f"table {name} does not match its spec: {'; '.join(problems)}")


def table_detail(spark: SparkSession, name: str) -> TableDetail:
    """Read `DESCRIBE DETAIL` for a table."""
    require_table(spark, name)
    row = spark.sql(f"DESCRIBE DETAIL {quote_identifier(name)}").collect()[0].asDict()
    return TableDetail(
        name=name,
        location=str(row["location"]),
        num_files=int(row["numFiles"] or 0),
        size_bytes=int(row["sizeInBytes"] or 0),
        partition_columns=tuple(row["partitionColumns"] or ()),
        properties=dict(row["properties"] or {}),
        created_at=row["createdAt"],
        last_modified=row["lastModified"],
    )
