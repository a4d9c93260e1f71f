"""Resuming a Kafka stream from the table's own log after its Spark checkpoint was lost.

Each Kafka batch's ledger entry records the offset ranges it landed, in the same Delta commit as
its rows and its SetTransaction marker. So the log alone says where the stream stands: a new
checkpoint can start at one past the last offset landed per partition (no gap, no duplicate).

Batch ids must keep growing under the app id, or the marker would skip the new batches: the
resumed stream's Spark batch 0 becomes lakehouse batch `marker + 1`. That base is written into
the new checkpoint directory before the stream starts, so restarts of the resumed stream keep
it; if the new checkpoint is lost too, the next resume computes it again from the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ingest.sources.kafka_admin import available_offsets
from ingest.sources.offsets import next_offsets
from tables.delta.history import read_ledger
from tables.delta.ledger import recorded_offsets
from tables.delta.markers import committed_batch
from tables.engine.storage import read_bytes, write_bytes
from tables.errors import CheckpointLostError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.sources.kafka import KafkaSource
    from tables.spec import TableSpec

BASE_FILE = "lakehouse-batch-base"


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed stream starts: its first batch id, and Kafka's starting offsets."""

    batch_base: int
    starting_offsets: str


def resume_point(
    spark: SparkSession, spec: TableSpec, app_id: str, source: KafkaSource
) -> ResumePoint | None:
    """The resume point of an app from its ledger, or None if it never committed a batch."""
    committed = committed_batch(spark, spec.name, app_id)
    if committed is None:
        return None
    entries = [e for e in read_ledger(spark, spec.name, app_id=app_id) if e.meta.kind == "batch"]
    ranges = [r for e in entries if (r := recorded_offsets(e.meta.source)) is not None]
    if not ranges:
        raise CheckpointLostError(
            f"app id {app_id!r} holds batches up to {committed} in {spec.name}, but its ledger "
            "records no Kafka offsets to resume from; restore the checkpoint or use a new app id"
        )
    topics = {topic for recorded in ranges for topic in recorded}
    partitions = {
        topic: [int(p) for p in found]
        for topic, found in available_offsets(spark, source, topics).items()
    }
    return ResumePoint(committed + 1, next_offsets(ranges, partitions=partitions))


def read_batch_base(spark: SparkSession, checkpoint: str) -> int:
    """The batch id a checkpoint's Spark batch 0 stands for (0 unless resumed from the log)."""
    data = read_bytes(spark, f"{checkpoint.rstrip('/')}/{BASE_FILE}")
    return 0 if data is None else parse_batch_base(data)


def parse_batch_base(data: bytes) -> int:
    """The batch id base a checkpoint's base file holds.

    The file holds the number as text; earlier versions wrote it with Java's `writeUTF`, which
    puts the text's length in two bytes before it.
    """
    if len(data) >= 2 and int.from_bytes(data[:2], "big") == len(data) - 2:
        data = data[2:]
    return int(data.decode("ascii").strip())


def write_batch_base(spark: SparkSession, checkpoint: str, base: int) -> None:
    """Record a resumed checkpoint's batch id base inside the checkpoint directory."""
    write_bytes(spark, f"{checkpoint.rstrip('/')}/{BASE_FILE}", f"{int(base)}\n".encode("ascii"))
