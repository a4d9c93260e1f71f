"""The exactly-once batch commit: one idempotent write per (table, app id, batch id).

Protocol (docs/DESIGN.md walks through it and its failure modes):
1. Read the app's SetTransaction marker from the log (no data is scanned).
2. Decide (`ingest.decisions.decide_batch`): commit, skip a retry, or stop on a rewound stream.
   A skipped batch is checked against its ledger entry: by the source's fingerprint when both
   carry one, else by the content hash; different content is an error.
3. Materialise the batch once (persist) so every later step sees the same rows, even from a
   non-deterministic source; classify rows; count them, hash their content and bound their keys
   in one job. Write rejected rows to the quarantine table (idempotent per batch through its
   own marker). Meanwhile Delta rebuilds the table state the audit and the write wait for.
4. Audit the keys the batch lands against the table version the marker was read from; the
   outcome goes into the ledger entry.
5. Where the table is an upsert table, write the batch's deletes as tombstones first.
6. Write the valid rows with the marker and the ledger entry in one commit: the MERGE, WHEN NOT
   MATCHED INSERT, with the ON clause pinned to literal app id and batch id, in a clone of the
   session that alone carries txnAppId, txnVersion and userMetadata; or, where that MERGE can
   match no row, Delta's idempotent append with the same marker and entry as per-write options.
7. On any failure, re-read the marker before anything else: if the batch landed, the outcome is
   known and reported; otherwise retry transient errors with backoff.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from ingest.commit.batch_result import BatchResult
from ingest.commit.evolve import evolve, is_evolving, with_table_columns
from ingest.commit.history import ACTION_COLUMN, plan_history, write_deletes
from ingest.commit.merge import BatchWrite, write_with_retries
from ingest.commit.options import CommitOptions
from ingest.commit.prepare import (
    PreparedBatch,
    assert_batch_schema,
    files_source,
    prepare_batch,
    time_window,
    with_lineage,
)
from ingest.commit.skip import skip_committed
from ingest.commit.upsert import DELETE_COLUMN, UpsertPlan, plan_upsert
from ingest.decisions import (
    decide_batch,
    dedup_condition,
    dedup_scope,
    is_one_task_batch,
    should_append,
    uses_high_water,
)
from ingest.timings import Stopwatch
from quality.audit import LandingKeys, audit_before_commit
from quality.check_results import CheckResult, audit_entry, checks_from_ledger, record
from quality.expectations import should_stop, stop_message
from quality.fates import landed_columns
from quality.malformed import landable_rows, with_raw_record
from quality.quarantine import REASON_COLUMN, ensure_quarantine_table, write_quarantine
from tables.delta import key_range
from tables.delta.history import naming_damaged_log
from tables.delta.ledger import CommitMetadata
from tables.delta.markers import read_markers
from tables.delta.state_rebuild import state_prefetched
from tables.delta.writer import TableWriter
from tables.engine.jvm import estimated_bytes
from tables.errors import CheckpointLostError, ExpectationFailedError
from tables.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from quality.expectations import GateOutcome

DEFAULT_OPTIONS = CommitOptions()


def commit_batch(
    writer: TableWriter,
    batch_id: int,
    batch: DataFrame,
    options: CommitOptions = DEFAULT_OPTIONS,
) -> BatchResult:
    """Commit `batch` into the writer's table exactly once for (app id, batch id).

    `batch` has the spec's data columns, optionally with the reader's corrupt-record and
    source-file columns (`options` says how they were read). The writer's caches (high-water
    mark, key ranges, commit clones) carry over to its next commits.
    """
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be a non-negative int, got {batch_id!r}")
    writer = writer.on(batch.sparkSession)
    writer.next_state.preempt()  # not idle: this commit rebuilds the state it reads itself
    spark, spec, app_id = writer.spark, writer.spec, writer.app_id
    schema = spec.data_schema(spark)
    assert_batch_schema(batch.schema, schema, spec.name)

    read = read_markers(spark, spec.name)  # TableNotFoundError if the table is not there
    committed = read.markers.get(app_id)
    action = decide_batch(batch_id, committed, fail_on_rewind=options.fail_on_rewind)
    if action == "rewound":
        raise CheckpointLostError(rewound_message(spec.name, app_id, batch_id, committed))
    evolved = with_table_columns(writer, batch, schema, options)
    if action == "skip":
        return skip_committed(writer, batch_id, evolved, committed, options.source)
    if is_evolving(writer, batch):
        evolved = evolve(writer, batch_id, evolved, options)
        if evolved.added:  # the schema commit moved the table on: read it again
            read = read_markers(spark, spec.name)
    batch, schema = evolved.batch, evolved.schema
    one_task = writer.devices.one_task and is_one_task_batch(estimated_bytes(batch))

    watch = Stopwatch()
    with ExitStack() as cleanup:
        if evolved.persisted is not None:
            cleanup.callback(evolved.persisted.unpersist)
        # Everything up to the audit leaves the table's state alone: Delta rebuilds it meanwhile.
        at = (read.version, spec.keys)
        learn = (
            partial(writer.key_ranges.learn, spark, spec.name, read.table_id, at)
            if key_range.are_keys_orderable(schema, spec.keys)
            else None
        )
        with state_prefetched(spark, spec.name, then=learn):
            with watch.stage("prepare"):
                prepared = prepare_batch(spec, schema, batch, options, one_task=one_task)
            cleanup.callback(prepared.classified.unpersist)
            staged = _stage(writer, batch_id, prepared, watch)
        stats, plan = prepared.stats, staged.plan
        bounds = {key: (low, high) for key, low, high in stats.key_bounds}
        # The first read of the table's state.
        with naming_damaged_log(spec.name), watch.stage("audit"):
            known = writer.key_ranges.known(read.table_id, read.version, spec.keys)
            landing = LandingKeys(
                staged.landable.select(*spec.row_keys),
                staged.landing,
                bounds,
                batch_id,
                staged.scope,
            )
            audit = audit_before_commit(writer, landing, read.version, known if learn else None)
            append = stats.rows == 0 or (
                plan is None
                and uses_high_water(spec.dedup)
                and writer.devices.blind_append
                and should_append(spec.dedup, batch_id, writer.high_water())
            )
        meta = CommitMetadata(
            app_id=app_id,
            batch_id=batch_id,
            source={**files_source(stats.files), **(options.source or {})},
            rows_read=stats.rows,
            rows_quarantined=stats.rows_rejected,
            content_hash=stats.content_hash,
            commit_token=uuid.uuid4().hex,
            checks=tuple(prepared.gate.records()) if prepared.gate is not None else (),
            audit=audit_entry(audit, read.version),
            upsert=plan.counts if plan else None,
        )
        write = BatchWrite(meta, staged.merge_source, staged.condition, append=append)
        if plan is not None and append:  # an empty batch: its marker and entry only
            write = replace(write, source=write.source.drop(DELETE_COLUMN, ACTION_COLUMN))
        elif plan is not None:
            deletes = plan.counts["deletes"]
            with watch.stage("tombstones") if deletes else nullcontext():
                condition, clauses = write_deletes(writer, schema, plan, write.source)
            write = replace(write, condition=condition, clauses=clauses)
        with watch.stage("write"):
            result = write_with_retries(writer, replace(write, attempts=options.max_attempts))
        result = replace(result, timings=dict(watch.seconds))
        if result.status != "committed":
            return result
        if learn is not None:
            writer.key_ranges.carry(read.table_id, read.version, result.version, bounds)
        if stats.rows == 0:
            return replace(result, status="empty", note="empty batch: its marker and ledger entry")
        if uses_high_water(spec.dedup):
            writer.raise_high_water(batch_id)
        return replace(
            result,
            key_bounds=stats.key_bounds,
            read_version=read.version,
            audit=replace(
                audit,
                app_id=app_id,
                batch_id=batch_id,
                version=result.version,
                action=spec.audit_policy,
            ),
        )


@dataclass(frozen=True)
class _Staged:
    """A prepared batch's rows to land, quarantined, with its MERGE's source and condition."""

    landable: DataFrame
    landing: int
    plan: UpsertPlan | None
    scope: str | None
    merge_source: DataFrame
    condition: str


def _stage(
    writer: TableWriter, batch_id: int, prepared: PreparedBatch, watch: Stopwatch
) -> _Staged:
    """Stop on a failed gate, plan an upsert, quarantine the rejected rows, build the MERGE's
    source: the steps before the audit, none of which reads the table's state but an SCD type 2
    plan (the rows of the batch's keys)."""
    spark, spec, app_id = writer.spark, writer.spec, writer.app_id
    schema = prepared.schema
    stats = prepared.stats
    if prepared.gate is not None and should_stop(prepared.gate):
        record(spark, _gate_results(spec, app_id, batch_id, prepared.gate), txn=None)
        raise ExpectationFailedError(stop_message(prepared.gate, spec.name, app_id, batch_id))
    rows = prepared.rows
    landable = rows.filter(landable_rows()).select(*landed_columns(schema, rows))
    landing = stats.rows - stats.rows_rejected - stats.rows_copies
    window = time_window(spec, schema, stats)
    ingested_at = datetime.now(UTC)

    def stamped(frame: DataFrame) -> DataFrame:
        # A small batch's stamp comes as data: its write compiles no code of its own.
        return with_lineage(frame, app_id, batch_id, ingested_at, stamp_joined=prepared.one_task)

    plan = None
    if spec.merge == "upsert":
        with watch.stage("plan"):
            if spec.history == "scd2":  # the source is the history's changes, lineage kept
                plan = plan_history(spark, spec, schema, stamped(landable), landing)
                merge_source = plan.source
            else:
                plan = plan_upsert(spark, spec, schema, landable, landing)
                merge_source = stamped(plan.source)
        landable, landing = plan.source, plan.landing
    else:
        merge_source = stamped(landable)
    if stats.rows_rejected:
        with watch.stage("quarantine"):
            ensure_quarantine_table(spark, spec)
            rejected = rows.filter(F.col(REASON_COLUMN).isNotNull())
            write_quarantine(with_raw_record(rejected, schema), spec, app_id, batch_id, ingested_at)
    return _Staged(
        landable=landable,
        landing=landing,
        plan=plan,
        # An upsert matches any row with the key: no scope.
        scope=None if plan else dedup_scope(spec.dedup, app_id, batch_id, window),
        merge_source=merge_source,
        condition=dedup_condition(spec.dedup, spec.keys, app_id, batch_id, window),
    )


def _gate_results(
    spec: TableSpec, app_id: str, batch_id: int, outcome: GateOutcome
) -> list[CheckResult]:
    return checks_from_ledger(spec.name, app_id, batch_id, None, tuple(outcome.records()))


def rewound_message(table: str, app_id: str, batch_id: int, committed: int | None) -> str:
    """The one-line explanation for a stream that restarted below the log's marker."""
    return (
        f"app id {app_id!r}: the stream is at batch {batch_id} but table {table} already holds "
        f"batch {committed} for it, so its checkpoint was lost or rewound; start the pipeline "
        f"with a new app id (rows already landed are kept), or move the app's marker explicitly"
    )
