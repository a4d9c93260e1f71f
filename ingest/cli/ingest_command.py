"""`lakehouse ingest`: run a pipeline, with one line per batch, a batch log, metrics, progress.

Per batch: one line on stderr as it commits, one JSON line in `<home>/logs/batches.jsonl` once
its audit settled (`ingest.observe.batch_log`), and with `--metrics-port` Prometheus counters on
127.0.0.1 (`ingest.observe.metrics`). An available-now run on a terminal draws its backlog as a
progress bar (`ingest.observe.progress`); elsewhere it prints nothing more than its lines.
"""

from __future__ import annotations

import signal
from contextlib import ExitStack
from typing import TYPE_CHECKING, Annotated

import typer

from ingest.cli.common import ConfigOption, emit, err, handle_errors, owns_process, spark_for
from ingest.config import assert_pipeline_ready, load_config
from ingest.observe.collector import CycleCollector
from ingest.observe.observer import Observers, RunObserver
from ingest.run_report import BatchTotals
from ingest.stopping import exit_code

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.commit.batch_result import BatchResult
    from ingest.config import PipelineSpec
    from ingest.maintenance import MaintenanceRun
    from ingest.observe.metrics import BatchMetrics
    from ingest.run_report import RunReport
    from quality.check_results import CheckResult
    from tables.spec import TableSpec


class _Console(RunObserver):
    """The stderr lines of a run: each batch as it commits (naming its table when the pipeline
    routes into several), each failed or repaired check."""

    def __init__(self, routed: bool = False) -> None:
        self.routed = routed

    def committed(self, result: BatchResult) -> None:
        """Say how a batch landed."""
        _show(result, result.table if self.routed else None)

    def audited(self, audit: CheckResult) -> None:
        """Say what a failed or repaired check found."""
        _warn(audit)

    def maintained(self, run: MaintenanceRun) -> None:
        """Say what upkeep the run did."""
        err.print(f"maintenance {run.describe()}")


@handle_errors
def ingest(
    context: typer.Context,
    pipeline: Annotated[
        str | None, typer.Argument(help="Pipeline name (optional when only one is declared).")
    ] = None,
    trigger: Annotated[
        str | None,
        typer.Option(
            help="Override the trigger: 'available-now' or an interval like '30 seconds'."
        ),
    ] = None,
    resume_from_log: Annotated[
        bool,
        typer.Option(
            "--resume-from-log",
            help="Kafka only: if the checkpoint is lost, start after the offsets the log records.",
        ),
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve Prometheus metrics on 127.0.0.1:PORT while the run lasts.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run a pipeline: land new records of its source in its table, exactly once.

    With the available-now trigger (the default, for scheduled jobs) it processes what is there
    and stops; with an interval it runs until interrupted. Batches the table already holds are
    reported as skipped. A Kafka pipeline whose checkpoint was lost can go on from the offset
    ranges the table's ledger records (--resume-from-log), with no gap and no duplicate. Each
    batch appends a JSON line to <home>/logs/batches.jsonl.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.observe.batch_log import BATCH_LOG, BatchLog
    from ingest.runner import RunOptions, run_pipeline
    from ingest.triggers import is_available_now
    from tables.identifiers import validate_pipeline_name

    if pipeline is not None:
        validate_pipeline_name(pipeline)
    cfg = load_config(config)
    spec_pipeline = cfg.pipeline(pipeline)
    specs = [cfg.table(table) for table in spec_pipeline.targets]
    spec = specs[0]
    assert_pipeline_ready(spec_pipeline, trigger)
    spark = spark_for(cfg, context)
    observers = Observers(err.print)
    observers.observers.append(_Console(routed=spec_pipeline.routing is not None))
    # py4j's proxies sit in reference cycles; collected between batches, the JVM lets go of them.
    observers.observers.append(CycleCollector(owns_process(context)))
    observers.observers.append(
        BatchLog(cfg.home / BATCH_LOG, spec.name, spec_pipeline.app_id, spark=spark, warn=err.print)
    )
    description = f"ingesting {spec_pipeline.name} into {', '.join(s.name for s in specs)}"
    with ExitStack() as stack:
        if metrics_port is not None:
            from ingest.observe.metrics import serving

            metrics = _metrics(spark, spec_pipeline, spec)
            err.print(f"metrics at {stack.enter_context(serving(metrics, metrics_port))}")
            observers.observers.append(metrics)
        if err.is_terminal and is_available_now(trigger or spec_pipeline.trigger):
            from ingest.observe.progress import BacklogProgress, backlog_of

            backlog = backlog_of(spark, spec_pipeline)
            progress = BacklogProgress(err, description, backlog)
            observers.observers.append(stack.enter_context(progress))
        else:
            stack.enter_context(err.status(f"{description}…"))
        options = RunOptions(trigger, cfg.home / "gx", resume_from_log)
        report = run_pipeline(spark, spec_pipeline, specs, options, observers)
    if report.finished_reset:
        err.print(f"{report.finished_reset}; finished it before the run")
    if report.removed_temp_files:
        err.print(
            f"checkpoint {spec_pipeline.checkpoint}: removed {len(report.removed_temp_files)} temp "
            f"file(s) a killed run left ({', '.join(report.removed_temp_files)})"
        )
    emit(
        f"{report.pipeline}: {report.batches} batches "
        f"({report.count('committed')} committed, {report.count('skipped')} skipped, "
        f"{report.count('empty')} empty), {report.rows_inserted} rows inserted, "
        + (
            f"{report.total('updated')} updated, {report.total('deleted')} deleted, "
            f"{report.total('ignored_older')} ignored as older, "
            if report.is_upsert
            else ""
        )
        + f"{report.rows_quarantined} quarantined into {report.quarantine_table}, "
        f"{report.audits_failed} failed check(s)"
        if report.dead_letter_table is None
        else _routed_summary(report)
    )
    if report.docs_url:
        emit(f"data docs: {report.docs_url}")
    if report.stopped_by is not None:
        err.print(stop_line(report))
        raise typer.Exit(exit_code(report.stopped_by))


def _routed_summary(report: RunReport) -> str:
    """The summary of a routed pipeline's run: its batches (as its first target saw them), the
    rows of each target, then the records no route took."""
    tables = report.tables
    first = tables.get(report.table, BatchTotals())
    per_table = "; ".join(
        f"{table}: {totals.rows['inserted']} inserted, {totals.rows['quarantined']} quarantined"
        for table, totals in tables.items()
    )
    statuses = ", ".join(
        f"{first.statuses[status]} {status}" for status in ("committed", "skipped", "empty")
    )
    return (
        f"{report.pipeline}: {first.batches} batches ({statuses})"
        + (f" into {len(tables)} tables ({per_table})" if per_table else "")
        + f", {report.dead_letters} not routed into {report.dead_letter_table}, "
        f"{report.audits_failed} failed check(s)"
    )


def _metrics(spark: SparkSession, pipeline: PipelineSpec, spec: TableSpec) -> BatchMetrics:
    """The run's metrics, their gauges set from the table as it is (one count of quarantine)."""
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from pyspark.sql import functions as F

    from ingest.observe.metrics import BatchMetrics
    from tables.delta.markers import committed_batch
    from tables.delta.table import table_exists
    from tables.spec import APP_ID_COLUMN

    metrics = BatchMetrics(spec.name, pipeline.app_id)
    last = (
        committed_batch(spark, spec.name, pipeline.app_id)
        if table_exists(spark, spec.name)
        else None
    )
    quarantined = (
        spark.table(spec.quarantine_name).where(F.col(APP_ID_COLUMN) == pipeline.app_id).count()
        if table_exists(spark, spec.quarantine_name)
        else 0
    )
    metrics.start(last, quarantined)
    return metrics


def _show(result: BatchResult, table: str | None = None) -> None:
    """The one stderr line of a batch, as it commits (`table`: the target it went into)."""
    batch = f"batch {result.batch_id}" + (f" into {table}" if table else "")
    if result.status != "committed":
        where = f"version {result.version}; " if result.version is not None else ""
        err.print(f"{batch}: {result.status} ({where}{result.note})")
        return
    landed = (
        f"inserted {result.rows_inserted}, updated {result.rows_updated}, deleted "
        f"{result.rows_deleted}, ignored as older {result.rows_ignored_older}"
        + (
            f", {result.rows_after_horizon} at or below the tombstone horizon (a key whose "
            "delete expired may be back)"
            if result.rows_after_horizon
            else ""
        )
        if result.is_upsert
        else f"inserted {result.rows_inserted}, already present {result.rows_already_present}"
    )
    err.print(
        f"{batch}: committed (read {result.rows_read}, {landed},"
        f" duplicates in batch {result.rows_duplicate_in_batch},"
        f" quarantined {result.rows_quarantined}, version {result.version}"
        + (f"; {result.note}" if result.note else "")
        + ")"
    )


def _warn(audit: CheckResult) -> None:
    """The stderr line of a failed or repaired check."""
    samples = ", ".join(audit.sample_keys)
    if audit.status == "repaired":
        err.print(
            f"batch {audit.batch_id}: later copies of {audit.failing_keys} record key(s) "
            f"deleted from {audit.table} in a repair commit (e.g. {samples})"
        )
    elif audit.status == "failed" and audit.check.startswith("expect:"):
        err.print(
            f"batch {audit.batch_id}: {audit.check} failed for {audit.failing_keys} of "
            f"{audit.checked_keys} rows ({audit.action}; e.g. {samples})"
        )
    elif audit.status == "failed":
        err.print(
            f"audit of batch {audit.batch_id}: {audit.failing_keys} record key(s) appear more "
            f"than once in {audit.table} (e.g. {samples})"
        )


def stop_line(report: RunReport) -> str:
    """The one line a run stopped by a signal prints: where it stopped and where it goes on."""
    name = signal.Signals(report.stopped_by or signal.SIGINT).name
    last = report.last_batch_id
    done = f"after batch {last}" if last is not None else "before its first batch"
    return (
        f"{report.pipeline}: stopped by {name} between batches, {done}; "
        "the next run goes on from there"
    )
