"""Replay: re-read committed batches from the sources their ledger entries name, and re-apply them.

A replay MERGE carries no txn markers (the app's marker already covers these batches) and is
recorded in the ledger as kind `replay` or `replace`. Plain replay uses the insert-only MERGE
with the table's dedup condition, so rows deleted by mistake come back and rows still present
(in this batch, or for `table`/`window` dedup anywhere in scope) are left alone. `--replace`
rewrites a batch's rows in one MERGE that updates matched rows, inserts missing ones and deletes
the batch's rows that the source no longer has: one atomic commit per batch, old rows or new,
never both or neither.

Every batch's source data (its files, or its Kafka offsets) is checked before anything is
written: if some is gone, nothing is replayed and the error names the batches and what is gone.
Each source reads its own recorded batches (`ingest.sources.Source.read_recorded`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import functions as F

from ingest.commit.history import ACTION_COLUMN, plan_history, write_deletes
from ingest.commit.merge import INSERT_NEW, replace_clauses
from ingest.commit.options import CommitOptions
from ingest.commit.prepare import prepare_batch, time_window, with_lineage
from ingest.commit.upsert import DELETE_COLUMN, UpsertPlan, plan_upsert
from ingest.decisions import batch_scope, dedup_condition
from ingest.isolation import recorded_culprits, without_culprits
from ingest.routing import routed_rows
from ingest.sources import Source, recorded_source
from quality.fates import landed_columns
from quality.malformed import landable_rows
from tables.delta.commits import MergeStatement, merge_into
from tables.delta.history import read_ledger
from tables.delta.ledger import LedgerEntry, admin_metadata
from tables.delta.table import require_table
from tables.delta.writer import TableWriter
from tables.errors import ConfigError, TerminalError
from tables.faults import fault_point
from tables.identifiers import validate_app_id
from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from quality.expectations import ExpectationGate
    from tables.spec import TableSpec

ReplayMode = Literal["replay", "replace"]


@dataclass(frozen=True)
class ReplayPlan:
    """One committed batch to replay: its ledger entry and where its rows come from."""

    entry: LedgerEntry
    source: Source

    @property
    def batch_id(self) -> int:
        """The batch id being replayed."""
        return self.entry.meta.batch_id

    @property
    def recorded(self) -> Mapping[str, Any]:
        """The source record of the batch's ledger entry: its files or offsets."""
        return self.entry.meta.source


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did (or, in a dry run, would do) to one batch."""

    batch_id: int
    rows_source: int
    rows_restored: int
    rows_already_present: int
    rows_updated: int = 0
    rows_deleted: int = 0
    rows_rejected: int = 0
    version: int | None = None
    dry_run: bool = False


def plan_replay(
    spark: SparkSession,
    spec: TableSpec,
    app_id: str,
    from_batch: int,
    to_batch: int | None,
    source: Source | None = None,
) -> list[ReplayPlan]:
    """The batches of `app_id` in [from_batch, to_batch] that the ledger holds, oldest first.

    `source` supplies the reader options (from the pipeline's config: a Kafka source's
    credentials are never in the ledger); without it the ledger's recorded source is read with
    default options.
    """
    validate_app_id(app_id)
    if from_batch < 0 or (to_batch is not None and to_batch < from_batch):
        raise ConfigError(f"invalid batch range {from_batch}..{to_batch}")
    require_table(spark, spec.name)
    entries = [
        e
        for e in read_ledger(spark, spec.name, app_id=app_id)
        if e.meta.kind == "batch"
        and from_batch <= e.meta.batch_id <= (to_batch if to_batch is not None else e.meta.batch_id)
    ]
    if not entries:
        upper = "" if to_batch is None else f"..{to_batch}"
        raise TerminalError(
            f"no committed batch of app id {app_id!r} in {from_batch}{upper} in the ledger of "
            f"{spec.name}"
        )
    return [_plan(e, source) for e in sorted(entries, key=lambda e: e.meta.batch_id)]


def _plan(entry: LedgerEntry, configured: Source | None) -> ReplayPlan:
    source = recorded_source(entry.meta.source, configured)
    if source is None:
        raise TerminalError(
            f"batch {entry.meta.batch_id}: its ledger records no source files or offsets to "
            "replay from"
        )
    return ReplayPlan(entry, source)


def assert_sources_present(spark: SparkSession, plans: list[ReplayPlan]) -> None:
    """Raise before any write if a batch's source data is gone, naming batches and what is gone."""
    missing = {
        plan.batch_id: gone for plan in plans if (gone := plan.source.missing(spark, plan.recorded))
    }
    if missing:
        listed = "; ".join(
            f"batch {batch}: {', '.join(gone)}" for batch, gone in sorted(missing.items())
        )
        raise TerminalError(f"source data is gone, nothing was replayed: {listed}")


@dataclass(frozen=True)
class ReplayOptions:
    """How batches are replayed: `replay` or `replace`, measured only (`dry_run`), through the
    table's expectation `gate`."""

    mode: ReplayMode = "replay"
    dry_run: bool = False
    gate: ExpectationGate | None = None


@dataclass(frozen=True)
class _Replayed:
    """A replayed batch's plan, its rows to land and their counts."""

    plan: ReplayPlan
    rows: DataFrame
    total: int
    rejected: int


def replay_batch(
    writer: TableWriter, plan: ReplayPlan, options: ReplayOptions | None = None
) -> ReplayResult:
    """Re-read one batch from its source and re-apply it (or measure it, if `dry_run`).

    `writer` is the table's, for the app id of the batch (`TableWriter(spark, spec, app_id)`);
    its commit clones carry over from batch to batch.

    An upsert table's batch is re-applied through the upsert's own MERGE: a version still newer
    than the table's lands again (a row deleted outside the pipeline comes back), others change
    nothing. `--replace` has no meaning there (rows belong to the key's newest version, not to a
    batch) and is refused.
    """
    spark, spec = writer.spark, writer.spec
    options = options or ReplayOptions()
    mode, dry_run = options.mode, options.dry_run
    if spec.merge == "upsert" and mode == "replace":
        raise ConfigError(
            f"table {spec.name} is an upsert table: its rows follow the newest version of each "
            "key, not a batch, so --replace does not apply; replay without it re-applies versions"
        )
    schema = spec.data_schema(spark)
    app_id = plan.entry.meta.app_id
    frame = plan.source.read_recorded(spark, schema, plan.recorded, spec.records)
    culprits = recorded_culprits(plan.recorded)  # isolated by its run: left out again
    frame = without_culprits(spark, frame, schema.fieldNames(), culprits)
    # A routed pipeline's target: its own records, routed as the run routed them.
    frame = routed_rows(frame, plan.recorded, spec.name, plan.source.raw_format)
    source = plan.source
    read = CommitOptions(raw_format=source.raw_format, reader_options=source.reader_options)
    prepared = prepare_batch(spec, schema, frame, replace(read, gate=options.gate))
    try:
        stats = prepared.stats
        rows = prepared.rows.filter(landable_rows()).select(*landed_columns(schema, prepared.rows))
        total = stats.rows - stats.rows_rejected - stats.rows_copies
        rejected = stats.rows_rejected
        replayed = _Replayed(plan, rows, total, rejected)
        if spec.merge == "upsert":
            return _apply_upsert(writer, replayed, schema, dry_run)
        if dry_run:
            present = _rows_present(spark, spec, app_id, plan.batch_id, rows)
            return ReplayResult(
                plan.batch_id, total, total - present, present, rows_rejected=rejected, dry_run=True
            )
        condition = dedup_condition(
            spec.dedup, spec.keys, app_id, plan.batch_id, time_window(spec, schema, stats)
        )
        return _apply(writer, replayed, mode, condition)
    finally:
        prepared.classified.unpersist()


def _rows_present(
    spark: SparkSession, spec: TableSpec, app_id: str, batch_id: int, rows: DataFrame
) -> int:
    target = spark.table(spec.name).where(
        (F.col(APP_ID_COLUMN) == app_id) & (F.col(BATCH_ID_COLUMN) == batch_id)
    )
    return rows.join(target.select(*spec.keys), on=list(spec.keys), how="left_semi").count()


def _apply(
    writer: TableWriter, replayed: _Replayed, mode: ReplayMode, condition: str
) -> ReplayResult:
    spark, spec = writer.spark, writer.spec
    plan, rows, total, rejected = replayed.plan, replayed.rows, replayed.total, replayed.rejected
    app_id, batch_id = plan.entry.meta.app_id, plan.batch_id
    meta = replace(
        admin_metadata(app_id, batch_id, mode, dict(plan.entry.meta.source)),
        rows_read=total + rejected,
        rows_quarantined=rejected,
        content_hash=plan.entry.meta.content_hash,
    )
    source = with_lineage(rows, app_id, batch_id, datetime.now(UTC))
    clauses = replace_clauses(batch_scope(app_id, batch_id)) if mode == "replace" else [INSERT_NEW]
    fault_point("before_write", batch_id)
    merge = MergeStatement(spec.name, source, condition, clauses, meta)
    metrics = merge_into(merge, writer.clones)
    fault_point("after_commit", batch_id)
    metrics = metrics or {}
    inserted = metrics.get("num_inserted_rows", 0)
    return ReplayResult(
        batch_id=batch_id,
        rows_source=total,
        rows_restored=inserted,
        rows_already_present=total - inserted,
        rows_updated=metrics.get("num_updated_rows", 0),
        rows_deleted=metrics.get("num_deleted_rows", 0),
        rows_rejected=rejected,
        version=_version_of(spark, spec, app_id, meta.commit_token),
    )


def _version_of(spark: SparkSession, spec: TableSpec, app_id: str, token: str) -> int | None:
    """The version of the commit whose ledger entry carries `token` (None if not found)."""
    entries = read_ledger(spark, spec.name, app_id=app_id, limit=16)
    return next((e.version for e in entries if e.meta.commit_token == token), None)


def _apply_upsert(
    writer: TableWriter, replayed: _Replayed, schema: StructType, dry_run: bool
) -> ReplayResult:
    """Re-apply an upsert batch's versions: the newest-wins MERGE, no txn markers."""
    spark, spec = writer.spark, writer.spec
    plan, rows, total, rejected = replayed.plan, replayed.rows, replayed.total, replayed.rejected
    app_id, batch_id = plan.entry.meta.app_id, plan.batch_id
    stamped = with_lineage(rows, app_id, batch_id, datetime.now(UTC))
    upsert: UpsertPlan
    if spec.history == "scd2":
        upsert = plan_history(spark, spec, schema, stamped, total)
        source = upsert.source
    else:
        upsert = plan_upsert(spark, spec, schema, rows, total)
        source = with_lineage(upsert.source, app_id, batch_id, datetime.now(UTC))
    if dry_run:
        inserted, updated, deleted = _upsert_effect(spark, spec, source)
        return ReplayResult(
            batch_id,
            total,
            inserted,
            _present(spec, upsert, total - inserted - updated - deleted),
            rows_updated=updated,
            rows_deleted=deleted,
            rows_rejected=rejected,
            dry_run=True,
        )
    meta = replace(
        admin_metadata(app_id, batch_id, "replay", dict(plan.entry.meta.source)),
        rows_read=total + rejected,
        rows_quarantined=rejected,
        content_hash=plan.entry.meta.content_hash,
        upsert=upsert.counts,
    )
    on, clauses = write_deletes(writer, schema, upsert, source)
    fault_point("before_write", batch_id)
    metrics = merge_into(MergeStatement(spec.name, source, on, clauses, meta), writer.clones)
    fault_point("after_commit", batch_id)
    metrics = metrics or {}
    inserted = metrics.get("num_inserted_rows", 0)
    updated = metrics.get("num_updated_rows", 0)
    deleted = metrics.get("num_deleted_rows", 0)
    return ReplayResult(
        batch_id=batch_id,
        rows_source=total,
        rows_restored=inserted,
        rows_already_present=_present(spec, upsert, total - inserted - updated - deleted),
        rows_updated=updated,
        rows_deleted=deleted,
        rows_rejected=rejected,
        version=_version_of(spark, spec, app_id, meta.commit_token),
    )


def _present(spec: TableSpec, upsert: UpsertPlan, unchanged: int) -> int:
    """The replayed versions the table already held: on an SCD type 2 table the versions and
    deletes its plan found there (a version placed may change two rows, or none)."""
    return upsert.held if spec.history == "scd2" else unchanged


def _upsert_effect(spark: SparkSession, spec: TableSpec, source: DataFrame) -> tuple[int, int, int]:
    """What the upsert MERGE of `source` would insert, update and delete in the table now."""
    if spec.history == "scd2":  # the source is the changes, each with its action
        counted = {r[0]: int(r[1]) for r in source.groupBy(ACTION_COLUMN).count().collect()}
        return counted.get("insert", 0), counted.get("update", 0), counted.get("delete", 0)
    sequence = str(spec.sequence_by)
    held = spark.table(spec.name).select(
        *spec.keys, F.col(sequence).alias("_lh_held"), F.lit(True).alias("_lh_found")
    )
    joined = source.join(held, on=list(spec.keys), how="left")
    found = F.coalesce(F.col("_lh_found"), F.lit(False))
    newer = F.col("_lh_held").isNull() | (F.col(sequence) > F.col("_lh_held"))
    delete = F.col(DELETE_COLUMN)
    row = joined.agg(
        F.sum((~delete & ~found).cast("int")).alias("inserted"),
        F.sum((~delete & found & newer).cast("int")).alias("updated"),
        F.sum((delete & found & newer).cast("int")).alias("deleted"),
    ).collect()[0]
    return int(row["inserted"] or 0), int(row["updated"] or 0), int(row["deleted"] or 0)
