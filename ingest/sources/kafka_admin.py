"""What a Kafka cluster still holds, asked with Kafka's admin client in the driver JVM.

Replay and resuming from the log need the earliest and next offsets of partitions before they
read: Spark's connector has no public API for that, so Kafka's own AdminClient (from the
connector's JARs) is called through py4j. This is the one module of `ingest` that does so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ingest.sources.offsets import OffsetRanges
from tables.errors import TerminalError, first_line
from tables.session import jvm_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.sources.kafka import KafkaSource

_ADMIN_TIMEOUT_SECONDS = 30


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

    Asked of the cluster with Kafka's admin client in the driver JVM (from the connector's JARs),
    configured with the source's client options. A missing topic has no entry.
    """
    jvm = jvm_of(spark)
    kafka = jvm.org.apache.kafka
    topics = sorted(set(topics))
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    admin = None
    try:
        props = jvm.java.util.Properties()
        for key, value in source.client_properties().items():
            props.setProperty(key, value)
        admin = kafka.clients.admin.AdminClient.create(props)
        found = admin.listTopics().names().get(_ADMIN_TIMEOUT_SECONDS, seconds)
        names = [t for t in topics if found.contains(t)]
        if not names:
            return {}
        described = admin.describeTopics(names).allTopicNames().get(_ADMIN_TIMEOUT_SECONDS, seconds)
        partitions = [
            kafka.common.TopicPartition(name, info.partition())
            for name in names
            for info in described.get(name).partitions()
        ]
        result: dict[str, dict[str, list[int]]] = {}
        for which in ("earliest", "latest"):
            spec = getattr(kafka.clients.admin.OffsetSpec, which)()
            listed = (
                admin.listOffsets({tp: spec for tp in partitions})
                .all()
                .get(_ADMIN_TIMEOUT_SECONDS, seconds)
            )
            for tp in partitions:
                entry = result.setdefault(str(tp.topic()), {}).setdefault(str(tp.partition()), [])
                entry.append(int(listed.get(tp).offset()))
        return result
    except Exception as exc:
        raise TerminalError(
            f"could not list the offsets of {', '.join(topics)} on {source.bootstrap_servers}: "
            f"{_java_message(exc)}"
        ) from exc
    finally:
        if admin is not None:
            admin.close(jvm.java.time.Duration.ofSeconds(5))


def _java_message(exc: BaseException) -> str:
    """The innermost Java exception's class and message of a py4j error, else its first line."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return first_line(exc)
    cause = java
    while cause.getCause() is not None:
        cause = cause.getCause()
    return first_line(Exception(str(cause.toString())))
