"""The post-commit duplicate audit, and the quality results table analysts can query by name.

After a batch commits, its record keys are checked in the table: a key that appears more than once
means a resend the MERGE did not match (a `batch` dedup scope, or a resend older than the `window`).
The check starts from the commit's own rows (found through the lineage columns, so file skipping
applies) and counts those keys over the whole table, reading only the key columns: it is not
bounded by the dedup window, since catching what the window let through is its purpose.

Each outcome is appended to `lakehouse_quality` once per (table, app id, batch id): the append
carries Delta's per-write txn options, so a re-run batch does not record its audit twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import functions as F

from tables.catalog import create_table
from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN, parse_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tables.spec import TableSpec

QUALITY_TABLE = "lakehouse_quality"
QUALITY_DDL = (
    "table_name STRING NOT NULL, table_version BIGINT, app_id STRING, batch_id BIGINT, "
    "check_name STRING NOT NULL, status STRING NOT NULL, checked_keys BIGINT, "
    "failing_keys BIGINT, sample_keys ARRAY<STRING>, checked_at TIMESTAMP NOT NULL"
)
DUPLICATE_KEYS_CHECK = "duplicate_record_keys"
SAMPLE_SIZE = 5
CheckStatus = Literal["passed", "failed"]


@dataclass(frozen=True)
class AuditResult:
    """One check's outcome for one commit (or for the whole table)."""

    table: str
    check: str
    status: CheckStatus
    checked_keys: int
    failing_keys: int
    sample_keys: tuple[str, ...]
    app_id: str | None = None
    batch_id: int | None = None
    version: int | None = None

    def as_row(self) -> dict[str, Any]:
        """The row recorded in the quality table."""
        return {
            "table_name": self.table,
            "table_version": self.version,
            "app_id": self.app_id,
            "batch_id": self.batch_id,
            "check_name": self.check,
            "status": self.status,
            "checked_keys": self.checked_keys,
            "failing_keys": self.failing_keys,
            "sample_keys": list(self.sample_keys),
            "checked_at": datetime.now(UTC),
        }


def quality_table_name(table: str) -> str:
    """The quality table in the same database as `table`."""
    database, _, _ = table.rpartition(".")
    return f"{database}.{QUALITY_TABLE}" if database else QUALITY_TABLE


def duplicate_keys(scope: DataFrame, keys: tuple[str, ...], candidates: DataFrame) -> AuditResult:
    """Count `candidates`' distinct keys and those appearing more than once in `scope`."""
    wanted = candidates.select(*keys).distinct()
    counted = scope.join(wanted, on=list(keys), how="left_semi").groupBy(*keys).count()
    key_text = F.concat_ws("|", *[F.coalesce(F.col(k).cast("string"), F.lit("∅")) for k in keys])
    row = counted.agg(
        F.count(F.lit(1)).alias("checked"),
        F.sum(F.when(F.col("count") > 1, 1).otherwise(0)).alias("failing"),
        F.slice(
            F.sort_array(F.collect_list(F.when(F.col("count") > 1, key_text))), 1, SAMPLE_SIZE
        ).alias("sample"),
    ).collect()[0]
    failing = int(row["failing"] or 0)
    return AuditResult(
        table="",
        check=DUPLICATE_KEYS_CHECK,
        status="failed" if failing else "passed",
        checked_keys=int(row["checked"] or 0),
        failing_keys=failing,
        sample_keys=tuple(row["sample"] or ()),
    )


def audit_commit(
    spark: SparkSession, spec: TableSpec, app_id: str, batch_id: int, version: int | None
) -> AuditResult:
    """Check that no record key of one committed batch appears twice in the table."""
    table = spark.table(spec.name)
    batch = table.where((F.col(APP_ID_COLUMN) == app_id) & (F.col(BATCH_ID_COLUMN) == batch_id))
    result = duplicate_keys(table, spec.keys, batch)
    return replace(result, table=spec.name, app_id=app_id, batch_id=batch_id, version=version)


def audit_table(spark: SparkSession, spec: TableSpec) -> AuditResult:
    """The same check over every key of the table (`lakehouse check --full`)."""
    table = spark.table(spec.name)
    return replace(duplicate_keys(table, spec.keys, table), table=spec.name)


def record(spark: SparkSession, results: list[AuditResult], *, txn: tuple[str, int] | None) -> None:
    """Append results to the quality table; with `txn` (app id, version), at most once."""
    if not results:
        return
    name = quality_table_name(results[0].table)
    schema = parse_struct(QUALITY_DDL)
    create_table(spark, name, schema)
    writer = spark.createDataFrame([r.as_row() for r in results], schema).write.format("delta")
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    writer.mode("append").saveAsTable(name)


def is_recorded(spark: SparkSession, table: str, app_id: str, batch_id: int) -> bool:
    """True if an audit of (app id, batch id) of `table` is in the quality table."""
    name = quality_table_name(table)
    if not spark.catalog.tableExists(name):
        return False
    found = spark.table(name).where(
        (F.col("table_name") == table)
        & (F.col("app_id") == app_id)
        & (F.col("batch_id") == batch_id)
    )
    return bool(found.limit(1).count())


def recent_results(spark: SparkSession, table: str, limit: int) -> list[dict[str, Any]]:
    """The latest recorded outcomes for a table, newest first."""
    name = quality_table_name(table)
    if not spark.catalog.tableExists(name):
        return []
    rows = (
        spark.table(name)
        .where(F.col("table_name") == table)
        .orderBy(F.col("checked_at").desc())
        .limit(limit)
        .collect()
    )
    return [r.asDict() for r in rows]
