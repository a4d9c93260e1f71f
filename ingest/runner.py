"""The stream runner: a landing-directory stream, foreachBatch into the exactly-once commit.

One checkpoint location per app id. Before the stream starts, the runner compares the checkpoint
with the log: an empty checkpoint for an app the table already holds batches of means the
checkpoint was lost, and the run stops with both numbers instead of re-numbering batches from 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ingest.commit import BatchResult, commit_batch
from ingest.decisions import is_checkpoint_lost
from ingest.sources import read_stream
from ingest.triggers import parse_trigger
from quality.audit import AuditResult, audit_commit, is_recorded, record
from quality.quarantine import ensure_quarantine_table
from tables.catalog import ensure_table
from tables.errors import CheckpointLostError, LakehouseError, TerminalError, first_line
from tables.log import committed_batch
from tables.session import hadoop_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.config import PipelineSpec
    from tables.spec import TableSpec

BatchCallback = Callable[[BatchResult], None]


@dataclass
class RunReport:
    """The outcome of one run of a pipeline: a result per batch the stream handed over."""

    pipeline: str
    app_id: str
    table: str
    results: list[BatchResult] = field(default_factory=list)
    audits: list[AuditResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        """How many batches ended with `status`."""
        return sum(1 for r in self.results if r.status == status)

    @property
    def rows_inserted(self) -> int:
        """Rows this run added to the target table."""
        return sum(r.rows_inserted for r in self.results)

    @property
    def rows_quarantined(self) -> int:
        """Rows this run sent to the quarantine table."""
        return sum(r.rows_quarantined for r in self.results)

    @property
    def failed_audits(self) -> list[AuditResult]:
        """The post-commit audits of this run that found duplicate record keys."""
        return [a for a in self.audits if a.status == "failed"]


def audit_after_commit(
    spark: SparkSession, spec: TableSpec, result: BatchResult
) -> AuditResult | None:
    """Audit a batch's record keys after its commit and record the outcome, once per batch.

    A batch skipped as already committed is audited only if its audit was never recorded (the
    process stopped between the commit and the audit).
    """
    if result.status == "empty":
        return None
    if result.status == "skipped" and is_recorded(spark, spec.name, result.app_id, result.batch_id):
        return None
    audit = audit_commit(spark, spec, result.app_id, result.batch_id, result.version)
    record(spark, [audit], txn=(f"audit.{spec.name}.{result.app_id}", result.batch_id))
    return audit


def checkpoint_has_offsets(spark: SparkSession, checkpoint: str) -> bool:
    """True if the stream checkpoint has written at least one offsets entry (any file system)."""
    fs, path = hadoop_path(spark, f"{checkpoint.rstrip('/')}/offsets")
    if not fs.exists(path):
        return False
    return any(status.getPath().getName().isdigit() for status in fs.listStatus(path))


def assert_checkpoint_matches_log(
    spark: SparkSession, spec: TableSpec, app_id: str, checkpoint: str
) -> None:
    """Raise CheckpointLostError if the log holds batches of the app but its checkpoint is empty."""
    committed = committed_batch(spark, spec.name, app_id)
    if is_checkpoint_lost(checkpoint_has_offsets(spark, checkpoint), committed):
        raise CheckpointLostError(
            f"app id {app_id!r}: table {spec.name} already holds batches up to {committed} for it, "
            f"but the checkpoint {checkpoint} is empty, so the stream would restart at batch 0; "
            "restore the checkpoint, or run under a new app id"
        )


def run_pipeline(
    spark: SparkSession,
    pipeline: PipelineSpec,
    spec: TableSpec,
    *,
    trigger: str | None = None,
    on_batch: BatchCallback | None = None,
    on_audit: Callable[[AuditResult], None] | None = None,
) -> RunReport:
    """Run a pipeline until its trigger says stop (available-now) or until interrupted."""
    trigger_args = parse_trigger(trigger or pipeline.trigger)
    if not _path_exists(spark, pipeline.source.path):
        raise TerminalError(f"landing directory {pipeline.source.path} does not exist")
    ensure_table(spark, spec)
    ensure_quarantine_table(spark, spec)
    assert_checkpoint_matches_log(spark, spec, pipeline.app_id, pipeline.checkpoint)
    report = RunReport(pipeline.name, pipeline.app_id, spec.name)
    failures: list[BaseException] = []

    def handle(batch: DataFrame, batch_id: int) -> None:
        try:
            result = commit_batch(
                batch.sparkSession,
                spec,
                pipeline.app_id,
                batch_id,
                batch,
                source=pipeline.source.describe(),
                fail_on_rewind=True,
            )
        except BaseException as exc:
            failures.append(exc)
            raise
        report.results.append(result)
        if on_batch is not None:
            on_batch(result)
        audit = audit_after_commit(batch.sparkSession, spec, result)
        if audit is not None:
            report.audits.append(audit)
            if on_audit is not None:
                on_audit(audit)

    stream = read_stream(spark, pipeline.source, spec.data_schema(spark))
    query = (
        stream.writeStream.queryName(
            f"lakehouse_{pipeline.app_id}".replace("-", "_").replace(".", "_")
        )
        .foreachBatch(handle)
        .option("checkpointLocation", pipeline.checkpoint)
        .trigger(**trigger_args)
        .start()
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception as exc:
        if failures and isinstance(failures[0], LakehouseError):
            raise failures[0] from exc
        cause = failures[0] if failures else exc
        raise TerminalError(f"stream {pipeline.name} failed: {first_line(cause)}") from exc
    return report


def _path_exists(spark: SparkSession, location: str) -> bool:
    fs, path = hadoop_path(spark, location)
    return bool(fs.exists(path))
