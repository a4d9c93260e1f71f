"""The stream runner: a landing-directory stream, foreachBatch into the exactly-once commit.

One checkpoint location per app id. Before the stream starts, the runner compares the checkpoint
with the log: an empty checkpoint for an app the table already holds batches of means the
checkpoint was lost, and the run stops with both numbers instead of re-numbering batches from 0.
The run holds its checkpoint (`ingest.checkpoint`: one run at a time, a killed run's temp files
removed), finishes a reset of its app that was cut short (`ingest.admin.apps.pending_reset`),
and stops between batches on SIGINT or SIGTERM (`ingest.stopping`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.admin.apps import finish_reset, pending_reset
from ingest.checkpoint import hold_checkpoint
from ingest.commit.batch_result import BatchResult
from ingest.config.checks import assert_pipeline_ready, origin_of
from ingest.config.where import located
from ingest.decisions import is_checkpoint_lost, lost_checkpoint_fixes, uses_high_water
from ingest.maintenance import MaintenanceRun, Upkeep
from ingest.observe.observer import RunObserver
from ingest.outcomes import assert_not_held, audit_after_commit, outcomes_of, recover_outcomes
from ingest.remote import RemoteStream
from ingest.sources.resume import read_batch_base, write_batch_base
from ingest.stopping import StopRequest, StopRequested, stop_on_signals
from ingest.stream_commit import (
    MicroBatch,
    StreamTarget,
    commit_stream_batch,
    interrupted_batch,
    reader_crashed,
)
from ingest.timings import settled_timings
from ingest.triggers import parse_trigger, start_query
from ingest.upsert_writer import hold_upsert_writer
from quality.expectations import ExpectationGate
from quality.quarantine import ensure_quarantine_table
from tables.delta.markers import committed_batch, is_prefetch_on, prefetch_state
from tables.delta.provision import ensure_table
from tables.delta.writer import TableWriter
from tables.engine.jvm import is_classic
from tables.engine.storage import child_names, exists
from tables.errors import CheckpointLostError, LakehouseError, TerminalError, error_summary
from tables.faults import fault_point

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.config import PipelineSpec
    from ingest.isolation import BatchIsolation
    from quality.check_results import CheckResult
    from tables.spec import TableSpec


@dataclass(frozen=True)
class RunOptions:
    """How a pipeline runs: its trigger (None: the pipeline's), where Great Expectations keeps
    its suites and Data Docs (None: validations are not kept), and whether an empty Kafka
    checkpoint starts after the offsets the ledger records (`resume_from_log`)."""

    trigger: str | None = None
    quality_dir: Path | None = None
    resume_from_log: bool = False


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
    maintenance: list[MaintenanceRun] = field(default_factory=list)

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
    options: RunOptions | None = None,
    observer: RunObserver | None = None,
) -> RunReport:
    """Run a pipeline until its trigger says stop (available-now) or until interrupted.

    `observer` hears of each batch committed, each outcome settled (recovered ones too), each
    batch settled with its stage timings (`BatchResult.timings`) and each batch that failed.
    """
    options = options or RunOptions()
    assert_pipeline_ready(pipeline, options.trigger)
    with located(origin_of(pipeline) / "source"):
        pipeline.source.assert_present(spark)
    ensure_table(spark, spec)
    ensure_quarantine_table(spark, spec)
    run = _Run(spark, pipeline, spec, options, observer or RunObserver())
    # The first batch's commit waits for the table's state (and, under `batch` dedup, the app's
    # high-water mark): both are built while the stream starts.
    then = run.writer.high_water if uses_high_water(spec.dedup) else None
    if is_prefetch_on(os.environ):
        prefetch_state(spark, spec.name, then=then)
    pending = pending_reset(spark, spec.name, pipeline.app_id)
    if pending is not None:
        finish_reset(spark, pending)
        run.report.finished_reset = pending.describe()
    with (
        hold_checkpoint(spark, pipeline.checkpoint) as removed,
        hold_upsert_writer(spark, spec, pipeline.app_id),
        stop_on_signals() as stop,
    ):
        run.report.removed_temp_files = tuple(removed)
        starting_offsets = _prepare_checkpoint(spark, pipeline, spec, options.resume_from_log)
        for recovered in recover_outcomes(run.writer, run.outcomes):
            run.audited(recovered)
        assert_not_held(spark, spec)
        if stop.requested:
            run.report.stopped_by = stop.signum
            return run.report
        try:
            if is_classic(spark):
                run.stream(stop, starting_offsets)
            else:
                run.through_connect(stop, starting_offsets)
                recover_outcomes(run.writer, run.outcomes)
        finally:
            run.outcomes.flush()
    if run.report.results and run.report.stopped_by is None:
        fault_point("after_checkpoint", run.report.results[-1].batch_id)
    return run.report


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


class _Run:
    """One run of a pipeline: its writer (the caches its commits share), report, outcome buffer
    and observer; the stream is run by `stream` (classic) or `through_connect`."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: PipelineSpec,
        spec: TableSpec,
        options: RunOptions,
        observer: RunObserver,
    ) -> None:
        self.spark, self.pipeline, self.spec = spark, pipeline, spec
        self.options, self.observer = options, observer
        self.writer = TableWriter(spark, spec, pipeline.app_id)
        self.report = RunReport(
            pipeline.name, pipeline.app_id, spec.name, quarantine_table=spec.quarantine_name
        )
        self.outcomes = outcomes_of(spark, spec, pipeline.app_id)
        self.trigger = parse_trigger(options.trigger or pipeline.trigger)
        self.upkeep = Upkeep()

    def committed(self, result: BatchResult) -> None:
        """Report a batch committed (or skipped)."""
        self.report.results.append(result)
        self.observer.committed(result)

    def audited(self, audit: CheckResult) -> None:
        """Report a settled outcome."""
        self.report.audits.append(audit)
        self.observer.audited(audit)

    def stream(self, stop: StopRequest, starting_offsets: str | None) -> None:
        """Run the stream in this process until its trigger ends it, it fails, or a stop."""
        spark, pipeline, spec = self.spark, self.pipeline, self.spec
        batch_base = read_batch_base(spark, pipeline.checkpoint)
        quality_dir = self.options.quality_dir
        gate = ExpectationGate(spec, quality_dir) if spec.expectations else None
        target = StreamTarget(pipeline, self.writer, gate)
        isolation = interrupted_batch(spark, pipeline, spec.name, batch_base)
        failures: list[BaseException] = []
        current: list[MicroBatch] = []  # the batch in progress, for a crash's report

        def handle(batch: DataFrame, batch_id: int) -> None:
            micro = MicroBatch(batch, batch_id, batch_base + batch_id)
            current[:] = [micro]
            try:
                with stop.batch(batch_id):
                    narrowing = isolation if isolation and isolation.batch_id == batch_id else None
                    self._batch(micro, target, narrowing)
            except BaseException as exc:
                failures.append(exc)
                if not isinstance(exc, StopRequested):
                    self.observer.failed(micro.batch_id, exc)
                raise

        stream = pipeline.source.open_stream(
            spark, spec.data_schema(spark), starting_offsets=starting_offsets, rules=spec.records
        )
        query = start_query(stream, pipeline.app_id, pipeline.checkpoint, self.trigger, handle)
        try:
            while not query.awaitTermination(_WAIT_SECONDS):
                self.outcomes.flush_if_due()
                if stop.requested:
                    stop.stop_between_batches(
                        query, lambda batch: _is_checkpointed(spark, pipeline.checkpoint, batch)
                    )
                    break
        except Exception as exc:
            self._raise_failure(exc, failures, stop, current[0] if current else None)
        finally:
            if gate is not None and self.report.results:
                self.report.docs_url = gate.build_docs()
        self.report.stopped_by = stop.signum

    def _batch(
        self, micro: MicroBatch, target: StreamTarget, isolation: BatchIsolation | None
    ) -> None:
        """Commit one batch, settle its audit, report it with its stage timings; then the
        table's upkeep, if due (`ingest.maintenance`)."""
        started = time.monotonic()
        if self.report.results:  # Spark checkpointed the previous batch before this one
            fault_point("after_checkpoint", self.report.results[-1].batch_id)
        result = commit_stream_batch(micro, target, isolation)
        committed, appended = time.monotonic(), self.outcomes.append_seconds
        self.committed(result)
        writer = self.writer.on(micro.rows.sparkSession)
        for audit in audit_after_commit(writer, result, self.outcomes):
            self.audited(audit)
        timings = settled_timings(
            result.timings,
            started,
            committed,
            time.monotonic(),
            self.outcomes.append_seconds - appended,
        )
        self.report.results[-1] = replace(result, timings=timings)
        self.observer.settled(self.report.results[-1])
        if result.status == "committed":  # upkeep after the batch, outside its timings
            for upkeep in self.upkeep.after(writer, result.batch_id):
                self.report.maintenance.append(upkeep)
                self.observer.maintained(upkeep)

    def _raise_failure(
        self,
        exc: Exception,
        failures: list[BaseException],
        stop: StopRequest,
        current: MicroBatch | None,
    ) -> None:
        """The stream's failure as the run's error (none for a stop): the batch's own error,
        a reader's crash in one line, or the query's failure summed up."""
        if stop.requested and all(isinstance(f, StopRequested) for f in failures):
            return
        if failures and isinstance(failures[0], LakehouseError):
            raise failures[0] from exc
        cause = failures[0] if failures else exc
        crashed = reader_crashed(self.pipeline, current, cause)
        if crashed is not None:
            raise crashed from exc
        raise TerminalError(f"stream {self.pipeline.name} failed: {error_summary(cause)}") from exc

    def through_connect(self, stop: StopRequest, starting_offsets: str | None) -> None:
        """Run the stream through a Spark Connect server (`ingest.remote`), reporting as it goes.

        The batches run in the server's Python worker; after the query ends, the outcomes it had
        not appended yet are appended from the ledger (`recover_outcomes`). A batch read back
        from the ledger is settled (its audit is in its entry) but carries no stage timings.
        """
        spark, pipeline, spec = self.spark, self.pipeline, self.spec

        def reported(result: BatchResult, audits: list[CheckResult]) -> None:
            self.committed(result)
            for audit in audits:
                self.audited(audit)
            self.observer.settled(result)

        stream = pipeline.source.open_stream(
            spark, spec.data_schema(spark), starting_offsets=starting_offsets, rules=spec.records
        )
        remote = RemoteStream(pipeline, spec, self.options.quality_dir, reported)
        remote.run(spark, stream, self.trigger, stop)
        self.report.stopped_by = stop.signum


_WAIT_SECONDS = 1


def _is_checkpointed(spark: SparkSession, checkpoint: str, batch_id: int) -> bool:
    """True once Spark's commit log holds the stream batch (its checkpoint is complete)."""
    return exists(spark, f"{checkpoint.rstrip('/')}/commits/{batch_id}")
