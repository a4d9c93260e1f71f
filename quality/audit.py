"""The post-commit duplicate audit, its policies, and the quality results table.

After a batch commits, its record keys are checked in the table: a key that appears more than once
means a resend the MERGE did not match (a `batch` dedup scope, a resend older than the `window`,
or a writer outside this project). The check is scoped so that its cost follows the batch, not
the table:
1. the batch's key bounds: each key column's min and max over the batch's valid rows, which the
   committer computes with its counts (no extra read); a batch audited later (after a restart)
   finds them by reading the commit's rows through the lineage columns (literal app id and batch
   id, so Delta skips every file of other batches);
2. the table is read only where each key column lies within those bounds, which Delta's data
   skipping turns into a handful of files when keys are clustered (sequential or time-ordered
   ids, or a table Z-ordered by key), and grouped by key once: a key is the batch's if one of
   its rows carries the batch's lineage, and it fails if it has more than one row.
The number of files the reads opened is recorded with the result.

What happens on a finding is the table's audit policy: `warn` records it; `fail` records it and
holds the table (further runs stop until an operator repairs it or a full check passes); `repair`
deletes the later copies of each key in a follow-up commit that the ledger records as `repair`.

Each outcome is appended to `lakehouse_quality` once per (table, app id, batch id): the append
carries Delta's per-write txn options, so a re-run batch does not record its audit twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import reduce
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import Window
from pyspark.sql import functions as F

from tables.catalog import create_table, require_table, table_exists
from tables.log import admin_metadata, commit_session
from tables.scan import files_scanned
from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN, INGESTED_AT_COLUMN, parse_struct

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from tables.spec import TableSpec

QUALITY_TABLE = "lakehouse_quality"
QUALITY_DDL = (
    "table_name STRING NOT NULL, table_version BIGINT, app_id STRING, batch_id BIGINT, "
    "check_name STRING NOT NULL, status STRING NOT NULL, checked_keys BIGINT, "
    "failing_keys BIGINT, sample_keys ARRAY<STRING>, checked_at TIMESTAMP NOT NULL, "
    "action STRING, files_read BIGINT"
)
DUPLICATE_KEYS_CHECK = "duplicate_record_keys"
REPAIR_APP_ID = "lakehouse-repair"
SAMPLE_SIZE = 5
CheckStatus = Literal["passed", "failed", "repaired"]


@dataclass(frozen=True)
class CheckResult:
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
    action: str | None = None
    files_read: int | None = None

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
            "action": self.action,
            "files_read": self.files_read,
        }


def quality_table_name(table: str) -> str:
    """The quality table in the same database as `table`."""
    database, _, _ = table.rpartition(".")
    return f"{database}.{QUALITY_TABLE}" if database else QUALITY_TABLE


def key_text(keys: tuple[str, ...]) -> Column:
    """A record key as one string (`a|b`), nulls shown as ∅, for samples."""
    return F.concat_ws("|", *[F.coalesce(F.col(k).cast("string"), F.lit("∅")) for k in keys])


def duplicate_keys(
    scope: DataFrame, keys: tuple[str, ...], of_batch: Column | None = None
) -> CheckResult:
    """Count the distinct keys of `scope` (with `of_batch`: of its matching rows), and those twice.

    With `of_batch`, one grouping of `scope` by key answers for the batch's keys: a key is the
    batch's if one of its rows matches `of_batch`, and it fails if it has more than one row.
    That is one aggregation, instead of a second read of the batch's rows and a join.
    """
    flag = (F.max(of_batch.cast("int")) if of_batch is not None else F.lit(1)).alias("ours")
    counted = scope.groupBy(*keys).agg(F.count(F.lit(1)).alias("count"), flag)
    counted = counted.where(F.col("ours") == 1)
    summary = counted.agg(
        F.count(F.lit(1)).alias("checked"),
        F.sum(F.when(F.col("count") > 1, 1).otherwise(0)).alias("failing"),
        F.slice(
            F.sort_array(F.collect_list(F.when(F.col("count") > 1, key_text(keys)))),
            1,
            SAMPLE_SIZE,
        ).alias("sample"),
    )
    row = summary.collect()[0]
    failing = int(row["failing"] or 0)
    return CheckResult(
        table="",
        check=DUPLICATE_KEYS_CHECK,
        status="failed" if failing else "passed",
        checked_keys=int(row["checked"] or 0),
        failing_keys=failing,
        sample_keys=tuple(row["sample"] or ()),
        files_read=files_scanned(summary),
    )


def commit_rows(spark: SparkSession, spec: TableSpec, app_id: str, batch_id: int) -> DataFrame:
    """The rows one commit inserted, found through the lineage columns (file skipping applies)."""
    return spark.table(spec.name).where(of_commit(app_id, batch_id))


def of_commit(app_id: str, batch_id: int) -> Column:
    """True for a row one commit inserted, by its lineage columns."""
    return (F.col(APP_ID_COLUMN) == app_id) & (F.col(BATCH_ID_COLUMN) == batch_id)


def key_ranges(batch: DataFrame, keys: tuple[str, ...]) -> tuple[dict[str, tuple[Any, Any]], int]:
    """Each key column's min and max over a commit's rows, and the files that read opened."""
    bounds = batch.agg(
        *[F.min(k).alias(f"min_{k}") for k in keys], *[F.max(k).alias(f"max_{k}") for k in keys]
    )
    row = bounds.collect()[0]
    return {k: (row[f"min_{k}"], row[f"max_{k}"]) for k in keys}, files_scanned(bounds)


def within_ranges(ranges: Mapping[str, tuple[Any, Any]]) -> Column:
    """A predicate Delta's data skipping can use: every key column within the batch's bounds."""
    return reduce(
        lambda left, right: left & right,
        [F.col(k).between(F.lit(low), F.lit(high)) for k, (low, high) in ranges.items()],
    )


def audit_commit(
    spark: SparkSession,
    spec: TableSpec,
    app_id: str,
    batch_id: int,
    version: int | None,
    bounds: Mapping[str, tuple[Any, Any]] | None = None,
) -> CheckResult:
    """Check that no record key of one committed batch appears twice in the table.

    `bounds` are each key column's min and max over the rows the commit inserted, or over a
    superset of them (the committer knows them from its batch); without them the commit's rows
    are read once to find them. Wider bounds only widen the read: a key is the batch's only if
    one of its rows carries the batch's lineage.
    """
    if bounds is not None and set(bounds) == set(spec.keys):
        ranges, bounds_files = dict(bounds), 0
    else:
        ranges, bounds_files = key_ranges(commit_rows(spark, spec, app_id, batch_id), spec.keys)
    if any(low is None for low, _ in ranges.values()):
        result = CheckResult("", DUPLICATE_KEYS_CHECK, "passed", 0, 0, (), files_read=0)
    else:
        scope = spark.table(spec.name).where(within_ranges(ranges))
        result = duplicate_keys(scope, spec.keys, of_commit(app_id, batch_id))
    return replace(
        result,
        table=spec.name,
        app_id=app_id,
        batch_id=batch_id,
        version=version,
        action=spec.audit_policy,
        files_read=(result.files_read or 0) + bounds_files,
    )


def audit_table(spark: SparkSession, spec: TableSpec) -> CheckResult:
    """The same check over every key of the table (`lakehouse check --full`).

    The table is looked up first: in a new process the embedded catalog registers it from its
    warehouse directory only then.
    """
    require_table(spark, spec.name)
    result = duplicate_keys(spark.table(spec.name), spec.keys)
    return replace(result, table=spec.name, action=spec.audit_policy)


def should_hold(result: CheckResult) -> bool:
    """True if a finding must stop the table's pipelines (the `fail` policy)."""
    return result.status == "failed" and result.action == "fail"


def should_repair(result: CheckResult) -> bool:
    """True if a finding is to be repaired by deleting the later copies (the `repair` policy)."""
    return result.status == "failed" and result.action == "repair"


def repair_duplicates(spark: SparkSession, spec: TableSpec, audit: CheckResult) -> CheckResult:
    """Delete every copy but the first-landed of the audited keys, in one commit.

    The first-landed copy (earliest ingestion time, then app id and batch id) stays: it is what
    readers have seen longest. With an audit of one commit only that commit's keys are repaired;
    with a full-table audit (no batch id), every duplicated key. The MERGE deletes the other
    copies by (key, app id, batch id), which identifies one row, and records a `repair` ledger
    entry; re-running it finds nothing to do.
    """
    from delta.tables import DeltaTable

    if audit.app_id is not None and audit.batch_id is not None:
        batch = commit_rows(spark, spec, audit.app_id, audit.batch_id)
        ranges, _ = key_ranges(batch, spec.keys)
        if any(low is None for low, _ in ranges.values()):
            return replace(audit, status="passed")
        scope = spark.table(spec.name).where(within_ranges(ranges))
        rows = scope.join(batch.select(*spec.keys).distinct(), on=list(spec.keys), how="left_semi")
    else:
        rows = spark.table(spec.name)
    order = Window.partitionBy(*spec.keys).orderBy(
        INGESTED_AT_COLUMN, APP_ID_COLUMN, BATCH_ID_COLUMN
    )
    extras = (
        rows.select(
            *spec.keys, APP_ID_COLUMN, BATCH_ID_COLUMN, F.row_number().over(order).alias("copy")
        )
        .where(F.col("copy") > 1)
        .drop("copy")
    )
    meta = admin_metadata(
        audit.app_id or REPAIR_APP_ID,
        audit.batch_id if audit.batch_id is not None else (audit.version or 0),
        "repair",
        {"kind": "repair", "check": audit.check, "keys": list(audit.sample_keys)},
    )
    clone = commit_session(spark, meta)
    on = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in (*spec.keys, APP_ID_COLUMN, BATCH_ID_COLUMN))
    (
        DeltaTable.forName(clone, spec.name)
        .alias("t")
        .merge(extras.alias("s"), on)
        .whenMatchedDelete()
        .execute()
    )
    return replace(audit, status="repaired", action="repair")


def record(spark: SparkSession, results: list[CheckResult], *, txn: tuple[str, int] | None) -> None:
    """Append results to the quality table; with `txn` (app id, version), at most once."""
    if not results:
        return
    name = quality_table_name(results[0].table)
    schema = parse_struct(QUALITY_DDL)
    create_table(spark, name, schema)
    writer = (
        spark.createDataFrame([r.as_row() for r in results], schema)
        .write.format("delta")
        .option("mergeSchema", "true")
    )
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    writer.mode("append").saveAsTable(name)


def checks_from_ledger(
    table: str,
    app_id: str,
    batch_id: int,
    version: int | None,
    checks: tuple[Mapping[str, Any], ...],
) -> list[CheckResult]:
    """The expectation outcomes a commit carried in its ledger entry, as results to record."""
    return [
        CheckResult(
            table=table,
            check=str(c.get("check")),
            status="passed" if c.get("status") == "passed" else "failed",
            checked_keys=int(c.get("checked") or 0),
            failing_keys=int(c.get("failing") or 0),
            sample_keys=tuple(str(s) for s in c.get("sample") or ()),
            app_id=app_id,
            batch_id=batch_id,
            version=version,
            action=str(c.get("action")) if c.get("action") else None,
        )
        for c in checks
    ]


def is_recorded(spark: SparkSession, table: str, app_id: str, batch_id: int) -> bool:
    """True if an audit of (app id, batch id) of `table` is in the quality table."""
    name = quality_table_name(table)
    if not table_exists(spark, name):
        return False
    found = spark.table(name).where(
        (F.col("table_name") == table)
        & (F.col("app_id") == app_id)
        & (F.col("batch_id") == batch_id)
    )
    return bool(found.limit(1).count())


def held_by(spark: SparkSession, table: str) -> dict[str, Any] | None:
    """The duplicate finding holding a `fail`-policy table, if its latest audit verdict is one.

    A later passing full check (`lakehouse check TABLE --full`) or a repair releases the table.
    """
    name = quality_table_name(table)
    if not table_exists(spark, name):
        return None
    latest = (
        spark.table(name)
        .where((F.col("table_name") == table) & (F.col("check_name") == DUPLICATE_KEYS_CHECK))
        .orderBy(F.col("checked_at").desc())
        .limit(1)
        .collect()
    )
    if not latest:
        return None
    row = latest[0].asDict()
    return row if row["status"] == "failed" and row.get("action") == "fail" else None


def recent_results(spark: SparkSession, table: str, limit: int) -> list[dict[str, Any]]:
    """The latest recorded outcomes for a table, newest first."""
    name = quality_table_name(table)
    if not table_exists(spark, name):
        return []
    rows = (
        spark.table(name)
        .where(F.col("table_name") == table)
        .orderBy(F.col("checked_at").desc())
        .limit(limit)
        .collect()
    )
    return [r.asDict() for r in rows]
