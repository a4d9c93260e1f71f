"""`lakehouse backfill-rescued TABLE COLUMN`: values rescued before their column existed, landed.

A field a table could not hold went to `_lh_rescued` (`fields`). Once the table has a column for
it (declared in the config, or added by `schema_evolution = "add_columns"`), the rows that
rescued it still hold NULL there. This command lands those values: for each row whose column is
NULL and whose rescued `fields` hold the name, the value is converted to the column's type (a JSON
string into a STRING column; a number or boolean by `try_cast` into a numeric or BOOLEAN column)
and, in one MERGE with a ledger entry of kind `backfill`, set in the column and removed from
`_lh_rescued`. A value that does not convert stays rescued and is counted. Re-running it finds
nothing more to do. The rows are found by (record key, app id, batch id), which names one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from quality.rescue import split_rescued_field
from tables.delta.commits import MergeStatement, merge_into
from tables.delta.history import table_version
from tables.delta.ledger import admin_metadata
from tables.delta.table import require_table
from tables.errors import ConfigError
from tables.identifiers import quote_identifier
from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN, RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tables.engine.clones import SessionClones
    from tables.spec import TableSpec

BACKFILL_APP_ID = "lakehouse-backfill"
#: Column types a rescued JSON value converts to without rounding or guessing a format.
CONVERTIBLE = (
    StringType,
    LongType,
    IntegerType,
    ShortType,
    ByteType,
    DoubleType,
    FloatType,
    BooleanType,
)
_VALUE, _REST, _SPLIT = "_lh_value", "_lh_rest", "_lh_split"


@dataclass(frozen=True)
class BackfillReport:
    """What one backfill did: rows landed, values left rescued, the commit's version."""

    table: str
    column: str
    rows_backfilled: int
    values_left: int
    version: int | None

    def describe(self) -> str:
        """One line for the operator."""
        left = (
            f"; {self.values_left} value(s) left in {RESCUED_COLUMN}: they do not convert to the "
            "column's type"
            if self.values_left
            else ""
        )
        return f"{self.table}: {self.rows_backfilled} row(s) backfilled into {self.column}{left}"


def backfill_rescued(
    spark: SparkSession, spec: TableSpec, column: str, clones: SessionClones
) -> BackfillReport:
    """Land the values of `column` that rows of `spec`'s table hold rescued (module docstring)."""
    require_table(spark, spec.name)
    schema = spark.table(spec.name).schema
    by_name = {f.name.lower(): f for f in schema.fields}
    field = by_name.get(column.lower())
    if field is None or field.name.startswith("_lh_"):
        raise ConfigError(f"table {spec.name} has no column {column}", key="column")
    if not isinstance(field.dataType, CONVERTIBLE):
        raise ConfigError(
            f"column {field.name} is {field.dataType.simpleString()}: backfill-rescued lands "
            "values into STRING, integer, DOUBLE, FLOAT and BOOLEAN columns",
            key="column",
        )
    name = field.name
    split = F.udf(
        lambda rescued: split_rescued_field(rescued, name),
        f"struct<{_VALUE}:string,{_REST}:string>",
    )
    keys = [*spec.keys, APP_ID_COLUMN, BATCH_ID_COLUMN]
    found = (
        spark.table(spec.name)
        .where(F.col(name).isNull() & F.col(RESCUED_COLUMN).isNotNull())
        .select(*keys, split(F.col(RESCUED_COLUMN)).alias(_SPLIT))
        .where(F.col(f"{_SPLIT}.{_VALUE}").isNotNull())
    )
    text = F.col(f"{_SPLIT}.{_VALUE}")
    is_string = text.startswith('"')
    if isinstance(field.dataType, StringType):
        value = F.when(
            is_string, F.from_json(F.concat(F.lit("["), text, F.lit("]")), "array<string>")[0]
        )
    else:
        value = F.when(
            ~is_string, F.expr(f"try_cast({_SPLIT}.{_VALUE} AS {field.dataType.simpleString()})")
        )
    staged = found.select(*keys, value.alias(_VALUE), F.col(f"{_SPLIT}.{_REST}").alias(_REST))
    [counts] = staged.agg(
        F.count(F.lit(1)).alias("found"), F.count(_VALUE).alias("landing")
    ).collect()
    total, landing = int(counts["found"] or 0), int(counts["landing"] or 0)
    if landing == 0:
        return BackfillReport(spec.name, name, 0, total, None)
    before = table_version(spark, spec.name)
    meta = admin_metadata(
        BACKFILL_APP_ID, before, "backfill", {"backfilled": {"column": name, "rows": landing}}
    )
    on = " AND ".join(f"t.{quote_identifier(c)} <=> s.{quote_identifier(c)}" for c in keys)
    target = quote_identifier(name)
    clause = (
        f"WHEN MATCHED AND t.{target} IS NULL THEN UPDATE SET t.{target} = s.{_VALUE}, "
        f"t.{RESCUED_COLUMN} = s.{_REST}"
    )
    source = staged.where(F.col(_VALUE).isNotNull())
    merge_into(MergeStatement(spec.name, source, on, [clause], meta), clones)
    return BackfillReport(
        spec.name, name, landing, total - landing, table_version(spark, spec.name)
    )
