"""What a Kafka cluster still holds: the earliest and next offsets of each partition.

Replay and resuming from the log need them before they read. Spark's connector has no public API
for that, so Kafka's own AdminClient (from the connector's JARs) is asked in the driver JVM
(`tables.engine.jvm.kafka`): a classic session's feature; over Spark Connect the read itself finds
offsets that are gone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ingest.sources.offsets import OffsetRanges
from tables.engine.jvm import kafka
from tables.errors import TerminalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.sources.kafka import KafkaSource


def lost_ranges(spark: SparkSession, source: KafkaSource, wanted: OffsetRanges) -> list[str]:
    """The ranges of `wanted` that Kafka no longer (or not yet) holds, one description each."""
    available = available_offsets(spark, source, wanted.keys())
    lost = []
    for topic, partitions in wanted.items():
        for partition, (first, last) in partitions.items():
            bounds = available.get(topic, {}).get(partition)
            if bounds is None:
                lost.append(f"{topic} partition {partition} does not exist")
            elif first < bounds[0]:
                lost.append(
                    f"{topic} partition {partition} offsets {first}-{min(last, bounds[0] - 1)} "
                    f"are gone (earliest available is {bounds[0]})"
                )
            elif last >= bounds[1]:
                lost.append(
                    f"{topic} partition {partition} ends at offset {bounds[1] - 1}, before {last}"
                )
    return lost


def assert_in_kafka(spark: SparkSession, source: KafkaSource, wanted: OffsetRanges) -> None:
    """Raise TerminalError naming the ranges Kafka no longer (or not yet) holds."""
    lost = lost_ranges(spark, source, wanted)
    if lost:
        raise TerminalError(
            "cannot re-read the batch from Kafka: "
            + "; ".join(lost)
            + " (retention or a record deletion removed them, or the topic was recreated)"
        )


def available_offsets(
    spark: SparkSession, source: KafkaSource, topics: Iterable[str]
) -> dict[str, dict[str, list[int]]]:
    """Per topic and partition, [earliest available offset, next offset to be written].

    Asked of the cluster with Kafka's admin client in the driver JVM (`tables.engine.jvm.kafka`),
    configured with the source's client options. A missing topic has no entry.
    """

    names = sorted(set(topics))
    try:
        return kafka.partition_offsets(spark, source.client_properties(), names)
    except kafka.KafkaAdminError as exc:
        raise TerminalError(
            f"could not list the offsets of {', '.join(names)} on {source.bootstrap_servers}: {exc}"
        ) from exc
