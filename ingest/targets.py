"""The tables one run commits into: a pipeline's table, or each target of a routed pipeline.

Each target keeps what a run keeps per table (its writer and caches, expectation gate, outcome
buffer, upkeep). A stream batch commits into the targets in their routes' order, then writes
the records no route takes into the dead-letter table (`ingest.routing`); each write carries
its own marker for (app id, batch id), so a batch run again after a crash between two of them
skips what landed and commits only what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ingest.config.checks import origin_of
from ingest.config.where import located
from ingest.isolation import without_culprits
from ingest.maintenance import Upkeep
from ingest.outcomes import outcomes_of
from ingest.routing import assert_same_reads, assert_same_rules
from ingest.stream_commit import MicroBatch, StreamTarget, commit_stream_batch
from quality.expectations import ExpectationGate
from quality.malformed import classify_rows, with_raw_record
from quality.quarantine import (
    REASON_COLUMN,
    append_rejected,
    ensure_dead_letter_table,
    ensure_quarantine_table,
)
from tables.delta.markers import committed_batch
from tables.delta.provision import ensure_table
from tables.delta.writer import TableWriter
from tables.faults import fault_point

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from ingest.commit.batch_result import BatchResult
    from ingest.config.model import PipelineSpec
    from ingest.isolation import BatchIsolation
    from quality.check_results import ResultLog
    from tables.spec import TableSpec


@dataclass
class TargetRun:
    """One table of a run: its spec, what its batches commit through, its outcome buffer and
    its upkeep (`ingest.maintenance`)."""

    spec: TableSpec
    stream: StreamTarget
    outcomes: ResultLog
    upkeep: Upkeep = field(default_factory=Upkeep)

    @property
    def writer(self) -> TableWriter:
        """The table's writer for the run's app id (its caches carry over between batches)."""
        return self.stream.writer


@dataclass(frozen=True)
class TargetBatch:
    """One stream batch over all of a run's tables: a result per target, in commit order, and
    the records it sent to the dead-letter table (None: none routed, or written by a run
    before)."""

    results: tuple[BatchResult, ...]
    dead_letters: int | None = None


def validate_specs(pipeline: PipelineSpec, specs: Sequence[TableSpec]) -> None:
    """Raise ValueError unless `specs` are the pipeline's targets, in its routes' order."""
    names = tuple(spec.name.lower() for spec in specs)
    wanted = tuple(table.lower() for table in pipeline.targets)
    if names != wanted:
        raise ValueError(
            f"pipeline {pipeline.name} commits into {', '.join(pipeline.targets)}; "
            f"got specs for {', '.join(spec.name for spec in specs) or 'no table'}"
        )


def target_runs(
    spark: SparkSession,
    pipeline: PipelineSpec,
    specs: Sequence[TableSpec],
    quality_dir: Path | None,
) -> tuple[TargetRun, ...]:
    """Each target's tables made (the table, its quarantine; a routed pipeline's dead-letter
    table) and its run state; a route expression that cannot read a target's records is
    refused first, in one line."""
    validate_specs(pipeline, specs)
    routing = pipeline.routing
    reads = {}
    if routing is not None:
        with located(origin_of(pipeline) / "route_by"):  # the error names the config key
            reads = {s.name: routing.reads(spark, s.name, s.data_schema(spark)) for s in specs}
            assert_same_reads(reads, routing.expression)
            assert_same_rules(specs)
        if pipeline.source.raw_format != "json":  # no record text to read a field from
            reads = {name: StructType([]) for name in reads}
    runs = []
    for spec in specs:
        ensure_table(spark, spec)
        ensure_quarantine_table(spark, spec)
        gate = ExpectationGate(spec, quality_dir) if spec.expectations else None
        writer = TableWriter(spark, spec, pipeline.app_id)
        stream = StreamTarget(pipeline, writer, gate, reads.get(spec.name))
        runs.append(TargetRun(spec, stream, outcomes_of(spark, spec, pipeline.app_id)))
    if routing is not None:
        ensure_dead_letter_table(spark, routing.dead_letter)
    return tuple(runs)


def commit_targets(
    micro: MicroBatch, targets: Sequence[TargetRun], isolation: BatchIsolation | None
) -> TargetBatch:
    """Commit one stream batch into every target, then its dead letters; end a narrowing.

    `between_targets` is a fault point before each write after the first.
    """
    results = []
    for index, target in enumerate(targets):
        if index:
            fault_point("between_targets", micro.batch_id)
        results.append(commit_stream_batch(micro, target.stream, isolation))
    dead_letters = None
    if targets[0].stream.pipeline.routing is not None:
        fault_point("between_targets", micro.batch_id)
        dead_letters = commit_dead_letters(micro, targets[0].stream, isolation)
    if isolation is not None:
        isolation.done()
    return TargetBatch(tuple(results), dead_letters)


def commit_dead_letters(
    micro: MicroBatch, target: StreamTarget, isolation: BatchIsolation | None
) -> int | None:
    """Write the batch's records no route takes into the dead-letter table, once.

    The records are read as the first target reads them; each gets its reason (the reader's
    for a record it could not read, else its route value). A batch with none writes nothing
    (the next run finds none again); a batch the table's marker holds is not read again.
    """
    pipeline, writer = target.pipeline, target.writer.on(micro.rows.sparkSession)
    routing, source, fields = pipeline.routing, pipeline.source, target.route_fields
    assert routing is not None
    assert fields is not None
    spark, spec = writer.spark, writer.spec
    held = committed_batch(spark, routing.dead_letter, pipeline.app_id)
    if held is not None and held >= micro.batch_id:
        return None
    schema = spec.data_schema(spark)
    with source.stream_batch(micro.rows, spec, micro.files(pipeline)) as (rows, _):
        if isolation is not None:
            culprits = isolation.culprits(rows, lambda _: None, [], by_record=True)
            rows = without_culprits(spark, rows, schema.fieldNames(), culprits)
        read = (source.raw_format, source.reader_options, spec.unknown_fields, spec.sequence_by)
        classified = classify_rows(rows, schema, spec.keys, *read)
        unrouted = routing.unrouted(classified, fields).withColumn(
            REASON_COLUMN, routing.reason(F.col(REASON_COLUMN))
        )
        kept = with_raw_record(unrouted, schema).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            count = kept.count()
            if count:
                txn = (pipeline.app_id, pipeline.app_id)
                append_rejected(kept, routing.dead_letter, txn, micro.batch_id, datetime.now(UTC))
        finally:
            kept.unpersist()
    return count
