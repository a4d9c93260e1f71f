"""Kafka's admin client in the driver JVM: the earliest and next offsets of partitions.

Spark's Kafka connector resolves offsets only while it reads; nothing public answers "what does
the cluster still hold". Kafka's own AdminClient, from the connector's JARs, does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tables.engine.jvm import gateway
from tables.errors import first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TIMEOUT_SECONDS = 30


class KafkaAdminError(Exception):
    """The admin client could not answer: its innermost Java error, in one line."""


def partition_offsets(
    spark: SparkSession, properties: Mapping[str, str], topics: Sequence[str]
) -> dict[str, dict[str, list[int]]]:
    """Per topic and partition, [earliest available offset, next offset to be written].

    A topic the cluster does not have has no entry.
    """
    jvm = gateway(spark, "asking Kafka which offsets it still holds (replay, --resume-from-log)")
    kafka = jvm.org.apache.kafka
    seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
    admin = None
    try:
        props = jvm.java.util.Properties()
        for key, value in properties.items():
            props.setProperty(key, value)
        admin = kafka.clients.admin.AdminClient.create(props)
        found = admin.listTopics().names().get(TIMEOUT_SECONDS, seconds)
        names = [t for t in topics if found.contains(t)]
        if not names:
            return {}
        described = admin.describeTopics(names).allTopicNames().get(TIMEOUT_SECONDS, seconds)
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
                .get(TIMEOUT_SECONDS, seconds)
            )
            for tp in partitions:
                entry = result.setdefault(str(tp.topic()), {}).setdefault(str(tp.partition()), [])
                entry.append(int(listed.get(tp).offset()))
        return result
    except Exception as exc:
        raise KafkaAdminError(_java_message(exc)) from exc
    finally:
        if admin is not None:
            admin.close(jvm.java.time.Duration.ofSeconds(5))


def _java_message(exc: BaseException) -> str:
    """The innermost Java exception's class and message of a py4j error, else its first line."""
    java: Any = getattr(exc, "java_exception", None)
    if java is None:
        return first_line(exc)
    cause = java
    while cause.getCause() is not None:
        cause = cause.getCause()
    return first_line(Exception(str(cause.toString())))
