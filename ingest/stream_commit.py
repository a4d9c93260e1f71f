"""One micro-batch of a pipeline's stream into its table: read by its source, narrowed, committed.

Shared by the classic runner (`ingest.runner`, foreachBatch in this process) and a Spark Connect
server's worker (`ingest.remote`). A batch the checkpoint says a previous run was inside of when
it ended is narrowed first (`ingest.isolation`): a record that crashed the reader is quarantined
and the rest commits under the same batch id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ingest.checkpoint import batch_source_files, last_committed_batch, last_offsets_batch
from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.commit.prepare import prepare_batch
from ingest.isolation import (
    BatchIsolation,
    crash_cause,
    is_interrupted,
    is_reader_crash,
    lost_cause,
    with_culprits,
    without_culprits,
)
from ingest.sources.long_lines import recorded_form
from tables.delta.markers import committed_batch
from tables.engine.jvm import is_jvm_lost
from tables.errors import ReaderCrashedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ingest.config.model import PipelineSpec
    from quality.expectations import ExpectationGate
    from tables.delta.writer import TableWriter


def interrupted_batch(
    spark: SparkSession, pipeline: PipelineSpec, batch_base: int
) -> BatchIsolation | None:
    """The narrowing of the batch a previous run ended inside of, if it did (Spark's batch id).

    Checked once, before the stream starts: the newest offsets entry without a commit entry,
    for a batch some target's marker does not hold.
    """
    checkpoint = pipeline.checkpoint
    last = last_offsets_batch(spark, checkpoint)
    done = last_committed_batch(spark, checkpoint)
    held = [committed_batch(spark, table, pipeline.app_id) for table in pipeline.targets]
    committed = None if None in held else min(b for b in held if b is not None)
    if last is None or not is_interrupted(last, done, committed, batch_base):
        return None
    return BatchIsolation(spark, checkpoint, last, lost_cause(spark))


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch of a stream as foreachBatch hands it over: raw rows and both its ids."""

    rows: DataFrame
    spark_id: int
    batch_id: int

    def files(self, pipeline: PipelineSpec) -> list[str] | None:
        """A file stream's files of this batch, as its rows name them (from the source log)."""
        if pipeline.source.kind != "files":
            return None
        found = batch_source_files(self.rows.sparkSession, pipeline.checkpoint, self.spark_id)
        return None if found is None else [recorded_form(name) for name in found]


@dataclass(frozen=True)
class StreamTarget:
    """What every batch of a pipeline's stream commits through: the pipeline, the run's writer
    (its caches kept from batch to batch) and the table's expectation gate."""

    pipeline: PipelineSpec
    writer: TableWriter
    gate: ExpectationGate | None = None
    #: A routed pipeline's target: the fields of its schema the route expression reads.
    route_fields: StructType | None = None

    def options(self, record: Mapping[str, Any]) -> CommitOptions:
        """A stream batch's commit options: its source record (with its route, for a target of
        a routed pipeline), how it was read, the gate."""
        source, routing = self.pipeline.source, self.pipeline.routing
        if routing is not None:
            record = {**record, **routing.recorded(self.writer.spec.name)}
        return CommitOptions(
            source=record,
            raw_format=source.raw_format,
            reader_options=source.reader_options,
            gate=self.gate,
            fail_on_rewind=True,
        )


def commit_stream_batch(
    micro: MicroBatch, target: StreamTarget, isolation: BatchIsolation | None = None
) -> BatchResult:
    """Commit one micro-batch of a pipeline's stream (also run in a Connect server's worker).

    A Kafka batch records its offset ranges in its ledger entry, a file batch its files. With
    `isolation`, the batch is narrowed first and its culprits named in its ledger entry (the
    caller ends the narrowing once every table has the batch: `BatchIsolation.done`). A target
    of a routed pipeline commits the records its route takes (`ingest.routing`). A batch that
    made a new version has its state rebuilt for the next batch if the stream idles meanwhile
    (`NextStateRebuild`; the run closes the last).
    """
    pipeline, source = target.pipeline, target.pipeline.source
    writer = target.writer.on(micro.rows.sparkSession)
    spark, spec = writer.spark, writer.spec
    files = micro.files(pipeline)
    with source.stream_batch(micro.rows, spec, files) as (rows, record):
        if isolation is not None:
            schema = spec.data_schema(spark)
            read = replace(target.options(record), gate=None)

            def trial(piece: DataFrame) -> None:
                prepare_batch(spec, schema, piece, read).classified.unpersist()

            by_record = source.raw_format != "csv"
            culprits = isolation.culprits(rows, trial, files or [], by_record=by_record)
            rows = without_culprits(spark, rows, schema.fieldNames(), culprits)
            record = with_culprits(record, culprits)
        if pipeline.routing is not None and target.route_fields is not None:
            rows = pipeline.routing.rows_for(rows, spec.name, target.route_fields)
        result = commit_batch(writer, micro.batch_id, rows, target.options(record))
    if result.status != "skipped":  # a new version: the next batch's commit reads it
        writer.next_state.start(spark, spec.name)
    return result


def reader_crashed(
    pipeline: PipelineSpec, micro: MicroBatch | None, cause: BaseException
) -> ReaderCrashedError | None:
    """The one-line error for a batch whose reader died under it, or None for any other error.

    `micro` is the batch in progress (None before the first). The driver JVM lost, or a Python
    worker or executor that died in a task, is a crash; the next run narrows that batch to the
    record and quarantines it. The files come from the checkpoint (local, or through a JVM
    that is still there).
    """
    lost = is_jvm_lost(cause)
    if micro is None or not (lost or is_reader_crash(cause)):
        return None
    named: list[str] | None = None
    with contextlib.suppress(Exception):
        named = micro.files(pipeline)
    files = tuple(sorted(named or ()))
    what = "the Spark driver JVM was lost" if lost else f"{crash_cause(cause)} (a task died)"
    where = f" reading {_named(files)}" if files else ""
    return ReaderCrashedError(
        f"pipeline {pipeline.name}, batch {micro.batch_id}: {what}{where}; the next run "
        "narrows the batch to the record that did it, quarantines that record and commits the "
        "rest (LAKEHOUSE_DEBUG=1 shows the error, <home>/logs/spark-driver.log the JVM's log)",
        pipeline=pipeline.name,
        batch_id=micro.batch_id,
        files=files,
    )


def _named(files: Sequence[str]) -> str:
    """One file by name, a few by name, many by count."""
    if len(files) == 1:
        return f"file {files[0]}"
    if len(files) <= 3:
        return "files " + ", ".join(files)
    return f"{len(files)} files ({files[0]}, ...)"
