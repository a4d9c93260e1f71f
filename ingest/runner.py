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
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.admin.apps import finish_reset, pending_reset
from ingest.checkpoint import hold_checkpoint, remove_stopped_query_temp_files
from ingest.commit.batch_result import BatchResult
from ingest.config.checks import assert_pipeline_ready, origin_of
from ingest.config.where import located
from ingest.decisions import is_checkpoint_lost, lost_checkpoint_fixes
from ingest.observe.observer import RunObserver
from ingest.outcomes import assert_not_held, audit_after_commit, recover_outcomes
from ingest.remote import RemoteStream
from ingest.run_report import RunReport
from ingest.sources.resume import read_batch_base, write_batch_base
from ingest.stopping import StopRequest, StopRequested, stop_on_signals
from ingest.stream_commit import (
    MicroBatch,
    interrupted_batch,
    reader_crashed,
)
from ingest.targets import TargetRun, commit_targets, target_runs
from ingest.timings import settled_timings
from ingest.triggers import parse_trigger, start_query
from ingest.upsert_writer import hold_upsert_writer
from tables.delta.markers import committed_batch
from tables.engine.jvm import is_classic
from tables.engine.storage import child_names, exists
from tables.errors import CheckpointLostError, LakehouseError, TerminalError, error_summary
from tables.faults import fault_point
from tables.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.config import PipelineSpec
    from ingest.isolation import BatchIsolation
    from quality.check_results import CheckResult


@dataclass(frozen=True)
class RunOptions:
    """How a pipeline runs: its trigger (None: the pipeline's), where Great Expectations keeps
    its suites and Data Docs (None: validations are not kept), and whether an empty Kafka
    checkpoint starts after the offsets the ledger records (`resume_from_log`)."""

    trigger: str | None = None
    quality_dir: Path | None = None
    resume_from_log: bool = False


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
    spec: TableSpec | Sequence[TableSpec],
    options: RunOptions | None = None,
    observer: RunObserver | None = None,
) -> RunReport:
    """Run a pipeline until its trigger says stop (available-now) or until interrupted.

    `spec` is the pipeline's table's, or one per target of a routed pipeline in its routes'
    order. `observer` hears of each batch committed (one result per target), each outcome
    settled (recovered ones too), each batch settled with its stage timings
    (`BatchResult.timings`) and each batch that failed.
    """
    options = options or RunOptions()
    specs = (spec,) if isinstance(spec, TableSpec) else tuple(spec)
    assert_pipeline_ready(pipeline, options.trigger)
    with located(origin_of(pipeline) / "source"):
        pipeline.source.assert_present(spark)
    targets = target_runs(spark, pipeline, specs, options.quality_dir)
    run = _Run(spark, pipeline, targets, options, observer or RunObserver())
    for target in targets:
        pending = pending_reset(spark, target.spec.name, pipeline.app_id)
        if pending is not None:
            finish_reset(spark, pending)
            run.report.finished_reset = pending.describe()
    with ExitStack() as held:
        removed = held.enter_context(hold_checkpoint(spark, pipeline.checkpoint))
        for target in targets:
            held.enter_context(hold_upsert_writer(spark, target.spec, pipeline.app_id))
        stop = held.enter_context(stop_on_signals())
        run.report.removed_temp_files = tuple(removed)
        starting_offsets = _prepare_checkpoint(spark, pipeline, specs, options.resume_from_log)
        for target in targets:
            for recovered in recover_outcomes(target.writer, target.outcomes):
                run.audited(recovered)
            assert_not_held(spark, target.spec)
        if stop.requested:
            run.report.stopped_by = stop.signum
            return run.report
        try:
            if is_classic(spark):
                run.stream(stop, starting_offsets)
            else:
                run.through_connect(stop, starting_offsets)
                recover_outcomes(targets[0].writer, targets[0].outcomes)
        finally:
            for target in targets:
                target.writer.next_state.close()
                target.outcomes.flush()
    if run.report.results and run.report.stopped_by is None:
        fault_point("after_checkpoint", run.report.results[-1].batch_id)
    return run.report


def _prepare_checkpoint(
    spark: SparkSession,
    pipeline: PipelineSpec,
    specs: Sequence[TableSpec],
    resume_from_log: bool,
) -> str | None:
    """Check the checkpoint against each target's log (or resume a Kafka one from the first
    target's): the starting offsets."""
    if resume_from_log and not checkpoint_has_offsets(spark, pipeline.checkpoint):
        # The target furthest behind: a run cut short between targets re-reads its batch.
        behind = min(specs, key=lambda s: committed_batch(spark, s.name, pipeline.app_id) or -1)
        point = pipeline.source.resume_point(spark, behind, pipeline.app_id)
        if point is not None:
            write_batch_base(spark, pipeline.checkpoint, point.batch_base)
            return point.starting_offsets
    for spec in specs:
        assert_checkpoint_matches_log(spark, pipeline, spec.name)
    return None


class _Run:
    """One run of a pipeline: its tables (each with its writer, caches, outcome buffer and
    upkeep), report and observer; the stream is run by `stream` (classic) or `through_connect`."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: PipelineSpec,
        targets: tuple[TargetRun, ...],
        options: RunOptions,
        observer: RunObserver,
    ) -> None:
        self.spark, self.pipeline, self.targets = spark, pipeline, targets
        self.options, self.observer = options, observer
        first = targets[0].spec
        self.report = RunReport(
            pipeline.name, pipeline.app_id, first.name, quarantine_table=first.quarantine_name
        )
        if pipeline.routing is not None:
            self.report.dead_letter_table = pipeline.routing.dead_letter
        self.trigger = parse_trigger(options.trigger or pipeline.trigger)

    def committed(self, result: BatchResult) -> None:
        """Report a batch committed (or skipped)."""
        self.report.add_result(result)
        self.observer.committed(result)

    def audited(self, audit: CheckResult) -> None:
        """Report a settled outcome."""
        self.report.add_audit(audit)
        self.observer.audited(audit)

    def stream(self, stop: StopRequest, starting_offsets: str | None) -> None:
        """Run the stream in this process until its trigger ends it, it fails, or a stop."""
        spark, pipeline, first = self.spark, self.pipeline, self.targets[0].spec
        batch_base = read_batch_base(spark, pipeline.checkpoint)
        isolation = interrupted_batch(spark, pipeline, batch_base)
        failures: list[BaseException] = []
        current: list[MicroBatch] = []  # the batch in progress, for a crash's report

        def handle(batch: DataFrame, batch_id: int) -> None:
            micro = MicroBatch(batch, batch_id, batch_base + batch_id)
            current[:] = [micro]
            try:
                with stop.batch(batch_id):
                    narrowing = isolation if isolation and isolation.batch_id == batch_id else None
                    self._batch(micro, narrowing)
            except BaseException as exc:
                failures.append(exc)
                if not isinstance(exc, StopRequested):
                    self.observer.failed(micro.batch_id, exc)
                raise

        stream = pipeline.source.open_stream(
            spark, first.data_schema(spark), starting_offsets=starting_offsets, rules=first.records
        )
        query = start_query(stream, pipeline.app_id, pipeline.checkpoint, self.trigger, handle)
        try:
            while not query.awaitTermination(_WAIT_SECONDS):
                for target in self.targets:
                    target.outcomes.flush_if_due()
                if stop.requested:
                    stop.stop_between_batches(
                        query, lambda batch: _is_checkpointed(spark, pipeline.checkpoint, batch)
                    )
                    if not query.isActive:
                        remove_stopped_query_temp_files(spark, pipeline.checkpoint)
                    break
        except Exception as exc:
            self._raise_failure(exc, failures, stop, current[0] if current else None)
        finally:
            gates = [t.stream.gate for t in self.targets if t.stream.gate is not None]
            if gates and self.report.batches:
                self.report.docs_url = gates[0].build_docs()
        self.report.stopped_by = stop.signum

    def _batch(self, micro: MicroBatch, isolation: BatchIsolation | None) -> None:
        """Commit one batch into every target, settle each audit, report each result with its
        stage timings; then each table's upkeep, if due (`ingest.maintenance`)."""
        started = time.monotonic()
        if self.report.results:  # Spark checkpointed the previous batch before this one
            fault_point("after_checkpoint", self.report.results[-1].batch_id)
        appended = sum(t.outcomes.append_seconds for t in self.targets)
        batch = commit_targets(micro, self.targets, isolation)
        committed = time.monotonic()
        if batch.dead_letters:
            self.report.dead_letters += batch.dead_letters
        for target, result in zip(self.targets, batch.results, strict=True):
            self.committed(result)
            writer = target.writer.on(micro.rows.sparkSession)
            for audit in audit_after_commit(writer, result, target.outcomes):
                self.audited(audit)
        stages: dict[str, float] = {}
        for result in batch.results:  # a routed batch's stages: summed over its targets
            for stage, seconds in result.timings.items():
                stages[stage] = stages.get(stage, 0.0) + seconds
        timings = settled_timings(
            stages,
            started,
            committed,
            time.monotonic(),
            sum(t.outcomes.append_seconds for t in self.targets) - appended,
        )
        settled = len(batch.results)
        for index in range(len(self.report.results) - settled, len(self.report.results)):
            self.report.results[index] = replace(self.report.results[index], timings=timings)
            self.observer.settled(self.report.results[index])
        for target, result in zip(self.targets, batch.results, strict=True):
            if result.status != "committed":  # upkeep after the batch, outside its timings
                continue
            writer = target.writer.on(micro.rows.sparkSession)
            for upkeep in target.upkeep.after(writer, result.batch_id):
                self.report.add_upkeep(upkeep)
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
        spark, pipeline, spec = self.spark, self.pipeline, self.targets[0].spec
        if pipeline.routing is not None:
            raise TerminalError(
                f"pipeline {pipeline.name} routes its records (route_by): a routed pipeline runs "
                "in a classic Spark session, not through a Spark Connect server (yet); run it "
                "without a Connect server"
            )

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
