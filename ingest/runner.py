"""The stream runner: a landing-directory stream, foreachBatch into the exactly-once commit.

One checkpoint location per app id. Before the stream starts, the runner compares the checkpoint
with the log: an empty checkpoint for an app the table already holds batches of means the
checkpoint was lost, and the run stops with both numbers instead of re-numbering batches from 0.
The run holds its checkpoint (`ingest.checkpoint`: one run at a time, a killed run's temp files
removed), finishes a reset of its app that was cut short (`ingest.admin.apps.pending_reset`),
and stops between batches on SIGINT or SIGTERM (`ingest.stopping`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.admin.apps import finish_reset, pending_reset
from ingest.checkpoint import hold_checkpoint
from ingest.commit import BatchResult
from ingest.commit.highwater import high_water
from ingest.config.checks import assert_pipeline_ready, origin_of
from ingest.config.where import located
from ingest.decisions import is_checkpoint_lost, lost_checkpoint_fixes, uses_high_water
from ingest.outcomes import assert_not_held, audit_after_commit, outcomes_of, recover_outcomes
from ingest.sources.resume import read_batch_base, write_batch_base
from ingest.stopping import StopRequest, StopRequested, stop_on_signals
from ingest.stream_commit import (
    MicroBatch,
    commit_stream_batch,
    interrupted_batch,
    reader_crashed,
)
from ingest.timings import settled_timings
from ingest.triggers import parse_trigger, start_query
from quality.expectations import ExpectationGate
from quality.quarantine import ensure_quarantine_table
from tables.catalog import ensure_table
from tables.errors import CheckpointLostError, LakehouseError, TerminalError, error_summary
from tables.faults import fault_point
from tables.jvm import is_classic
from tables.markers import committed_batch, prefetch_state
from tables.storage import child_names, exists

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.config import PipelineSpec
    from quality.results import CheckResult, ResultLog
    from tables.spec import TableSpec

BatchCallback = Callable[[BatchResult], None]
#: Called with the batch id and the error when a stream batch fails (not when a stop skips it).
FailureCallback = Callable[[int, BaseException], None]


@dataclass
class RunReport:
    """The outcome of one run of a pipeline: a result per batch the stream handed over."""

    pipeline: str
    app_id: str
    table: str
    results: list[BatchResult] = field(default_factory=list)
    audits: list[CheckResult] = field(default_factory=list)
    docs_url: str | None = None
    quarantine_table: str = ""
    stopped_by: int | None = None
    removed_temp_files: tuple[str, ...] = ()
    finished_reset: str | None = None

    def count(self, status: str) -> int:
        """How many batches ended with `status`."""
        return sum(1 for r in self.results if r.status == status)

    @property
    def rows_inserted(self) -> int:
        """Rows this run added to the target table."""
        return sum(r.rows_inserted for r in self.results)

    def total(self, fate: str) -> int:
        """This run's rows of one fate (`updated`, `deleted`, ...) over its batches."""
        return sum(getattr(r, f"rows_{fate}") for r in self.results)

    @property
    def is_upsert(self) -> bool:
        """True if this run's batches went through the upsert MERGE."""
        return any(r.is_upsert for r in self.results)

    @property
    def rows_quarantined(self) -> int:
        """Rows this run sent to the quarantine table."""
        return sum(r.rows_quarantined for r in self.results)

    @property
    def failed_audits(self) -> list[CheckResult]:
        """The post-commit checks of this run that found duplicate keys or failing rows."""
        return [a for a in self.audits if a.status == "failed"]


def checkpoint_has_offsets(spark: SparkSession, checkpoint: str) -> bool:
    """True if the stream checkpoint has written at least one offsets entry (any file system)."""
    return any(name.isdigit() for name in child_names(spark, f"{checkpoint.rstrip('/')}/offsets"))


def assert_checkpoint_matches_log(spark: SparkSession, pipeline: PipelineSpec, table: str) -> None:
    """Raise CheckpointLostError if the log holds batches of the app but its checkpoint is empty.

    The error names every fix that applies: a Kafka source can resume from the offsets its
    ledger records (`--resume-from-log`).
    """
    app_id, checkpoint = pipeline.app_id, pipeline.checkpoint
    committed = committed_batch(spark, table, app_id)
    if is_checkpoint_lost(checkpoint_has_offsets(spark, checkpoint), committed):
        raise CheckpointLostError(
            f"app id {app_id!r}: table {table} already holds batches up to {committed} for it, "
            f"but the checkpoint {checkpoint} is empty, so the stream would restart at batch 0; "
            + lost_checkpoint_fixes(pipeline.name, pipeline.source.kind)
        )


def run_pipeline(
    spark: SparkSession,
    pipeline: PipelineSpec,
    spec: TableSpec,
    *,
    trigger: str | None = None,
    on_batch: BatchCallback | None = None,
    on_audit: Callable[[CheckResult], None] | None = None,
    quality_dir: Path | None = None,
    resume_from_log: bool = False,
    on_settled: BatchCallback | None = None,
    on_failed: FailureCallback | None = None,
) -> RunReport:
    """Run a pipeline until its trigger says stop (available-now) or until interrupted.

    `quality_dir` is where Great Expectations keeps its suites, validation results and Data
    Docs; without it, validations are not kept and no docs are built. With `resume_from_log`, a
    Kafka pipeline whose checkpoint is empty starts after the offsets its ledger records instead
    of stopping with CheckpointLostError. `on_settled` gets each batch once its audit is settled,
    with its stage timings (`BatchResult.timings`); `on_failed` gets a batch that failed.
    """
    assert_pipeline_ready(pipeline, trigger)
    trigger_args = parse_trigger(trigger or pipeline.trigger)
    with located(origin_of(pipeline) / "source"):
        pipeline.source.assert_present(spark)
    ensure_table(spark, spec)
    ensure_quarantine_table(spark, spec)
    # The first batch's commit waits for the table's state (and, under `batch` dedup, the app's
    # high-water mark): both are built while the stream starts.
    high = partial(high_water, spark, spec.name, pipeline.app_id)
    prefetch_state(spark, spec.name, then=high if uses_high_water(spec.dedup) else None)
    report = RunReport(
        pipeline.name, pipeline.app_id, spec.name, quarantine_table=spec.quarantine_name
    )
    pending = pending_reset(spark, spec.name, pipeline.app_id)
    if pending is not None:
        finish_reset(spark, pending)
        report.finished_reset = pending.describe()
    outcomes = outcomes_of(spark, spec, pipeline.app_id)
    with hold_checkpoint(spark, pipeline.checkpoint) as removed, stop_on_signals() as stop:
        report.removed_temp_files = tuple(removed)
        starting_offsets = _prepare_checkpoint(spark, pipeline, spec, resume_from_log)
        for recovered in recover_outcomes(spark, spec, pipeline.app_id, outcomes):
            report.audits.append(recovered)
            if on_audit is not None:
                on_audit(recovered)
        assert_not_held(spark, spec)
        if stop.requested:
            report.stopped_by = stop.signum
            return report
        try:
            if is_classic(spark):
                _run_stream(
                    spark,
                    pipeline,
                    spec,
                    report,
                    stop,
                    trigger_args,
                    starting_offsets,
                    outcomes,
                    on_batch=on_batch,
                    on_audit=on_audit,
                    quality_dir=quality_dir,
                    on_settled=on_settled,
                    on_failed=on_failed,
                )
            else:
                _run_through_connect(
                    spark,
                    pipeline,
                    spec,
                    report,
                    stop,
                    trigger_args,
                    starting_offsets,
                    on_batch=on_batch,
                    on_audit=on_audit,
                    quality_dir=quality_dir,
                    on_settled=on_settled,
                )
                recover_outcomes(spark, spec, pipeline.app_id, outcomes)
        finally:
            outcomes.flush()
    if report.results and report.stopped_by is None:
        fault_point("after_checkpoint", report.results[-1].batch_id)
    return report


def _prepare_checkpoint(
    spark: SparkSession, pipeline: PipelineSpec, spec: TableSpec, resume_from_log: bool
) -> str | None:
    """Check the checkpoint against the log (or resume a Kafka one from it): starting offsets."""
    if resume_from_log and not checkpoint_has_offsets(spark, pipeline.checkpoint):
        point = pipeline.source.resume_point(spark, spec, pipeline.app_id)
        if point is not None:
            write_batch_base(spark, pipeline.checkpoint, point.batch_base)
            return point.starting_offsets
    assert_checkpoint_matches_log(spark, pipeline, spec.name)
    return None


def _run_stream(
    spark: SparkSession,
    pipeline: PipelineSpec,
    spec: TableSpec,
    report: RunReport,
    stop: StopRequest,
    trigger_args: Mapping[str, Any],
    starting_offsets: str | None,
    outcomes: ResultLog,
    *,
    on_batch: BatchCallback | None,
    on_audit: Callable[[CheckResult], None] | None,
    quality_dir: Path | None,
    on_settled: BatchCallback | None = None,
    on_failed: FailureCallback | None = None,
) -> None:
    """Run the stream until its trigger ends it, it fails, or a stop signal stops it."""
    source = pipeline.source
    schema = spec.data_schema(spark)
    batch_base = read_batch_base(spark, pipeline.checkpoint)
    gate = ExpectationGate(spec, quality_dir) if spec.expectations else None
    failures: list[BaseException] = []
    isolation = interrupted_batch(spark, pipeline, spec.name, batch_base)
    current: list[MicroBatch] = []  # the batch in progress, for a crash's report

    def handle(batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        try:
            with stop.batch(batch_id):
                if report.results:  # Spark checkpointed the previous batch before this one
                    fault_point("after_checkpoint", report.results[-1].batch_id)
                narrowing = isolation if isolation and isolation.batch_id == batch_id else None
                current[:] = [MicroBatch(batch, batch_id, batch_base + batch_id)]
                result = commit_stream_batch(current[0], pipeline, spec, gate, narrowing)
                committed, appended = time.monotonic(), outcomes.append_seconds
                report.results.append(result)
                if on_batch is not None:
                    on_batch(result)
                audits = audit_after_commit(batch.sparkSession, spec, result, outcomes)
                for audit in audits:
                    report.audits.append(audit)
                    if on_audit is not None:
                        on_audit(audit)
                timings = settled_timings(
                    result.timings,
                    started,
                    committed,
                    time.monotonic(),
                    outcomes.append_seconds - appended,
                )
                report.results[-1] = replace(result, timings=timings)
                if on_settled is not None:
                    on_settled(report.results[-1])
        except BaseException as exc:
            failures.append(exc)
            if on_failed is not None and not isinstance(exc, StopRequested):
                on_failed(batch_base + batch_id, exc)
            raise

    stream = source.open_stream(
        spark, schema, starting_offsets=starting_offsets, rules=spec.records
    )
    query = start_query(stream, pipeline.app_id, pipeline.checkpoint, trigger_args, handle)
    try:
        while not query.awaitTermination(_WAIT_SECONDS):
            outcomes.flush_if_due()
            if stop.requested:
                stop.stop_between_batches(
                    query, lambda batch: _is_checkpointed(spark, pipeline.checkpoint, batch)
                )
                break
    except Exception as exc:
        if stop.requested and all(isinstance(f, StopRequested) for f in failures):
            pass
        elif failures and isinstance(failures[0], LakehouseError):
            raise failures[0] from exc
        else:
            cause = failures[0] if failures else exc
            crashed = reader_crashed(pipeline, current[0] if current else None, cause)
            if crashed is not None:
                raise crashed from exc
            raise TerminalError(f"stream {pipeline.name} failed: {error_summary(cause)}") from exc
    finally:
        if gate is not None and report.results:
            report.docs_url = gate.build_docs()
    report.stopped_by = stop.signum


_WAIT_SECONDS = 1


def _run_through_connect(
    spark: SparkSession,
    pipeline: PipelineSpec,
    spec: TableSpec,
    report: RunReport,
    stop: StopRequest,
    trigger_args: Mapping[str, Any],
    starting_offsets: str | None,
    *,
    on_batch: BatchCallback | None,
    on_audit: Callable[[CheckResult], None] | None,
    quality_dir: Path | None,
    on_settled: BatchCallback | None = None,
) -> None:
    """Run the stream through a Spark Connect server (`ingest.remote`), reporting as it goes.

    The batches run in the server's Python worker; after the query ends, the outcomes it had not
    appended yet are appended from the ledger (`recover_outcomes`). A batch read back from the
    ledger is settled (its audit is in its entry) but carries no stage timings.
    """
    from ingest.remote import run_remote_stream

    def reported(result: BatchResult, audits: list[CheckResult]) -> None:
        report.results.append(result)
        if on_batch is not None:
            on_batch(result)
        for audit in audits:
            report.audits.append(audit)
            if on_audit is not None:
                on_audit(audit)
        if on_settled is not None:
            on_settled(result)

    stream = pipeline.source.open_stream(
        spark, spec.data_schema(spark), starting_offsets=starting_offsets, rules=spec.records
    )
    run_remote_stream(
        spark,
        pipeline,
        spec,
        stop,
        stream,
        trigger_args,
        read_batch_base(spark, pipeline.checkpoint),
        on_result=reported,
        quality_dir=quality_dir,
    )
    report.stopped_by = stop.signum


def _is_checkpointed(spark: SparkSession, checkpoint: str, batch_id: int) -> bool:
    """True once Spark's commit log holds the stream batch (its checkpoint is complete)."""
    return exists(spark, f"{checkpoint.rstrip('/')}/commits/{batch_id}")
