"""The duplicate audit of each committed batch, its policies, and the repair.

A key that appears more than once in the table means a resend the MERGE did not match (a `batch`
dedup scope, a resend older than the `window`, or a writer outside this project). The audit
answers, for every record key a batch lands, whether the table holds it twice, and its cost
follows the batch, not the table:
1. the batch's key bounds (each key column's min and max over its valid rows) come with its
   counts, from the job that counts and hashes it;
2. the table is read only where each key column lies within those bounds, which Delta's data
   skipping turns into a handful of files when keys are clustered (sequential or time-ordered
   ids, or a table Z-ordered by key); with no file in the bounds, nothing more is read.

`audit_before_commit` answers on the version the commit read, before it commits, so the outcome
goes into the commit's own ledger entry; the runner re-audits after the commit
(`audit_commit`) only when another commit landed between the two. `audit_table` checks every key
(`lakehouse check --full`). What a finding does is the table's audit policy: `warn` records it;
`fail` records it and holds the table (further runs stop until an operator repairs it or a full
check passes); `repair` deletes the later copies of each key in a follow-up commit that the
ledger records as `repair`. Outcomes are kept by `quality.check_results`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from quality.check_results import DUPLICATE_KEYS_CHECK, CheckResult
from tables.delta.commits import MergeStatement, merge_into
from tables.delta.history import table_at
from tables.delta.key_range import KeyRange, is_outside
from tables.delta.ledger import admin_metadata
from tables.delta.table import require_table
from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN, INGESTED_AT_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from tables.delta.writer import TableWriter
    from tables.engine.clones import SessionClones
    from tables.spec import TableSpec

REPAIR_APP_ID = "lakehouse-repair"
SAMPLE_SIZE = 5


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
        files_read=len(scope.inputFiles()),
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
    return {k: (row[f"min_{k}"], row[f"max_{k}"]) for k in keys}, len(batch.inputFiles())


def within_ranges(ranges: Mapping[str, tuple[Any, Any]]) -> Column:
    """A predicate Delta's data skipping can use: every key column within the batch's bounds."""
    return reduce(
        lambda left, right: left & right,
        [F.col(k).between(F.lit(low), F.lit(high)) for k, (low, high) in ranges.items()],
    )


def audit_commit(
    writer: TableWriter,
    batch_id: int,
    version: int | None,
    bounds: Mapping[str, tuple[Any, Any]] | None = None,
) -> CheckResult:
    """Check that no record key of one batch `writer`'s app committed appears twice in the table.

    `bounds` are each key column's min and max over the rows the commit inserted, or over a
    superset of them (the committer knows them from its batch); without them the commit's rows
    are read once to find them. Wider bounds only widen the read: a key is the batch's only if
    one of its rows carries the batch's lineage.
    """
    spark, spec, app_id = writer.spark, writer.spec, writer.app_id
    if bounds is not None and set(bounds) == set(spec.keys):
        ranges, bounds_files = dict(bounds), 0
    else:
        ranges, bounds_files = key_ranges(commit_rows(spark, spec, app_id, batch_id), spec.keys)
    if any(low is None for low, _ in ranges.values()):
        result = CheckResult("", DUPLICATE_KEYS_CHECK, "passed", 0, 0, (), files_read=0)
    else:
        scope = spark.table(spec.name).where(within_ranges(ranges))
        result = duplicate_keys(scope, spec.row_keys, of_commit(app_id, batch_id))
    return replace(
        result,
        table=spec.name,
        app_id=app_id,
        batch_id=batch_id,
        version=version,
        action=spec.audit_policy,
        files_read=(result.files_read or 0) + bounds_files,
    )


@dataclass(frozen=True)
class LandingKeys:
    """The keys a batch is about to land: their rows (`keys`), how many rows land (`landing`),
    each key column's min and max (`ranges`), the batch id, and `scope`, the target-side part of
    the commit's dedup condition on alias `t` (None: any row with the key matches)."""

    keys: DataFrame
    landing: int
    ranges: Mapping[str, tuple[Any, Any]]
    batch_id: int
    scope: str | None


def audit_before_commit(
    writer: TableWriter, batch: LandingKeys, as_of: int, known: KeyRange | None = None
) -> CheckResult:
    """The audit of a batch about to commit, decided on the table version `as_of` it will read.

    A key is inserted unless a row in scope matches it;
    after the commit it is the batch's if it was inserted or a matching row carries the batch's
    lineage, and it fails if the table then holds it more than once. That is the post-commit
    audit's answer, as long as no other commit lands between `as_of` and this batch's commit.
    With no file of the table within the bounds, no row can match and nothing more is read;
    `known`, the range every key of the table at `as_of` lies in (`tables.delta.key_range`), can say
    so without the Spark job Delta's file skipping runs.
    """
    spark, spec = writer.spark, writer.spec
    landing, ranges, scope = batch.landing, batch.ranges, batch.scope
    if landing == 0 or any(low is None for low, _ in ranges.values()):
        return CheckResult(spec.name, DUPLICATE_KEYS_CHECK, "passed", 0, 0, (), files_read=0)
    if is_outside(known, ranges):
        return CheckResult(spec.name, DUPLICATE_KEYS_CHECK, "passed", landing, 0, (), files_read=0)
    table = table_at(spark, spec.name, as_of).where(within_ranges(ranges))
    files = len(table.inputFiles())
    if files == 0:
        return CheckResult(spec.name, DUPLICATE_KEYS_CHECK, "passed", landing, 0, (), files_read=0)
    app_id, batch_id = writer.app_id, batch.batch_id
    in_scope = F.expr(scope) if scope is not None else F.lit(True)
    found = (
        table.alias("t")
        .groupBy(*spec.row_keys)
        .agg(
            F.count(F.lit(1)).alias("_rows"),
            F.sum(F.when(in_scope, 1).otherwise(0)).alias("_matched"),
            F.max(of_commit(app_id, batch_id).cast("int")).alias("_ours"),
        )
    )
    joined = batch.keys.join(found, on=list(spec.row_keys), how="left")
    inserted = F.coalesce(F.col("_matched"), F.lit(0)) == 0
    rows_after = F.coalesce(F.col("_rows"), F.lit(0)) + inserted.cast("int")
    ours = inserted | (F.coalesce(F.col("_ours"), F.lit(0)) == 1)
    failing = ours & (rows_after > 1)
    summary = joined.agg(
        F.sum(ours.cast("int")).alias("checked"),
        F.sum(failing.cast("int")).alias("failing"),
        F.slice(
            F.sort_array(F.collect_list(F.when(failing, key_text(spec.row_keys)))), 1, SAMPLE_SIZE
        ).alias("sample"),
    ).collect()[0]
    count = int(summary["failing"] or 0)
    return CheckResult(
        table=spec.name,
        check=DUPLICATE_KEYS_CHECK,
        status="failed" if count else "passed",
        checked_keys=int(summary["checked"] or 0),
        failing_keys=count,
        sample_keys=tuple(summary["sample"] or ()),
        files_read=files,
    )


def audit_table(spark: SparkSession, spec: TableSpec) -> CheckResult:
    """The same check over every key of the table (`lakehouse check --full`).

    The table is looked up first: in a new process the embedded catalog registers it from its
    warehouse directory only then.
    """
    require_table(spark, spec.name)
    result = duplicate_keys(spark.table(spec.name), spec.row_keys)
    return replace(result, table=spec.name, action=spec.audit_policy)


def should_hold(result: CheckResult) -> bool:
    """True if a finding must stop the table's pipelines (the `fail` policy)."""
    return result.status == "failed" and result.action == "fail"


def should_repair(result: CheckResult) -> bool:
    """True if a finding is to be repaired by deleting the later copies (the `repair` policy)."""
    return result.status == "failed" and result.action == "repair"


def repair_duplicates(
    spark: SparkSession, spec: TableSpec, audit: CheckResult, clones: SessionClones
) -> CheckResult:
    """Delete every copy but one of the audited keys, in one commit.

    On an insert table the first-landed copy (earliest ingestion time, then app id and batch id)
    stays: it is what readers have seen longest. On an upsert table the newest version by
    `sequence_by` stays (then the first landed), as the upsert itself would have kept it; on an
    SCD type 2 table a row is its key and `_lh_valid_from`, so only copies of one version go. With
    an audit of one commit only that commit's keys are repaired; with a full-table audit (no
    batch id), every duplicated key. The MERGE deletes the other copies by (key, app id, batch
    id), which identifies one row, and records a `repair` ledger entry; re-running it finds
    nothing to do.
    """
    if audit.app_id is not None and audit.batch_id is not None:
        batch = commit_rows(spark, spec, audit.app_id, audit.batch_id)
        ranges, _ = key_ranges(batch, spec.keys)
        if any(low is None for low, _ in ranges.values()):
            return replace(audit, status="passed")
        scope = spark.table(spec.name).where(within_ranges(ranges))
        rows = scope.join(batch.select(*spec.keys).distinct(), on=list(spec.keys), how="left_semi")
    else:
        rows = spark.table(spec.name)
    newest = [F.col(spec.sequence_by).desc_nulls_last()] if spec.sequence_by else []
    order = Window.partitionBy(*spec.row_keys).orderBy(
        *newest, INGESTED_AT_COLUMN, APP_ID_COLUMN, BATCH_ID_COLUMN
    )
    extras = (
        rows.select(
            *spec.row_keys, APP_ID_COLUMN, BATCH_ID_COLUMN, F.row_number().over(order).alias("copy")
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
    on = " AND ".join(
        f"t.`{c}` <=> s.`{c}`" for c in (*spec.row_keys, APP_ID_COLUMN, BATCH_ID_COLUMN)
    )
    merge_into(MergeStatement(spec.name, extras, on, ["WHEN MATCHED THEN DELETE"], meta), clones)
    return replace(audit, status="repaired", action="repair")
