"""Kafka source: a topic (or pattern) read with Spark's Kafka connector, offsets in the ledger.

Reading:
- `read_kafka_stream` opens the topic as a stream with `failOnDataLoss=true`, so offsets that
  retention removed before they were read stop the stream instead of being skipped silently.
  JSON values are parsed with the table schema, PERMISSIVE: a value that does not parse keeps its
  raw text in the corrupt-record column and has null data columns, so it reaches quarantine.
  Every row also carries its Kafka coordinates (`_lh_kafka_*` columns).
- `read_kafka_range` re-reads exactly the offset ranges a batch's ledger entry names (replay). It
  first checks that Kafka still holds them and names the lost ones if not.

Offsets:
- `offset_ranges(batch)` is what a batch covered: topic -> partition -> [first, last] offset of
  its rows, from one small aggregation. The runner records it in the batch's ledger entry.
- `next_offsets(ledger ranges)` turns recorded ranges into Spark's `startingOffsets` JSON (one
  past the last offset landed per partition), for restarting a stream whose checkpoint is lost
  from what the table itself says it holds.
- `gaps` / `are_contiguous` check that consecutive batches' ranges neither skip nor repeat
  offsets. Rows are what is recorded, so offsets that hold no record (transaction markers of a
  transactional producer, records removed by compaction) show up as gaps.

Secrets: `options` are Kafka client settings (`security.protocol`, `sasl.jaas.config`,
`ssl.keystore.password`, ...). Their values reach the connector and nothing else: `describe()`
(the ledger) and `repr()` show them through `redact_options`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType

from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    json_records,
)
from tables.errors import ConfigError, TerminalError, first_line
from tables.identifiers import shorten
from tables.session import jvm_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ValueFormat = Literal["json", "raw"]
#: topic -> partition (as a string, as in JSON) -> [first offset, last offset], both inclusive.
OffsetRanges = dict[str, dict[str, list[int]]]

TOPIC_COLUMN = "_lh_kafka_topic"
PARTITION_COLUMN = "_lh_kafka_partition"
OFFSET_COLUMN = "_lh_kafka_offset"
TIMESTAMP_COLUMN = "_lh_kafka_timestamp"
KEY_COLUMN = "_lh_kafka_key"
#: The Kafka coordinates every row read from Kafka carries, after the data columns.
KAFKA_COLUMNS = (TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN, KEY_COLUMN)
#: Table columns with these names are filled from the record's Kafka coordinates (cast to the
#: column's declared type), not from its value: the mapping of key, topic, partition, offset and
#: timestamp into the table schema.
METADATA_COLUMNS = {
    "kafka_key": KEY_COLUMN,
    "kafka_topic": TOPIC_COLUMN,
    "kafka_partition": PARTITION_COLUMN,
    "kafka_offset": OFFSET_COLUMN,
    "kafka_timestamp": TIMESTAMP_COLUMN,
}

REDACTED = "***"
#: Kafka's own config provider that resolves `${env:NAME}` in client settings (Kafka >= 3.5).
ENV_CONFIG_PROVIDER = {
    "config.providers": "env",
    "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
}
_ENV_REFERENCE = "${env:"
_SECRET_KEY = re.compile(r"password|secret|jaas|token|key|credential", re.IGNORECASE)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_SERVER = re.compile(r"^[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}$")
#: Options the connector sets itself or rejects (Spark's Kafka integration guide).
_RESERVED_OPTIONS = frozenset(
    {
        "bootstrap.servers",
        "auto.offset.reset",
        "key.deserializer",
        "value.deserializer",
        "enable.auto.commit",
        "interceptor.classes",
    }
)
_RAW_SCHEMA = {"key": StringType(), "value": StringType()}
_ADMIN_TIMEOUT_SECONDS = 30


def redact_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options with every value whose key looks secret replaced by `***`.

    A key is secret if it contains password, secret, jaas, token, key or credential, in any
    case: `sasl.jaas.config`, `ssl.keystore.password`, `ssl.key.password`,
    `ssl.truststore.password`, `ssl.keystore.key`, ... Over-redacting is harmless; the values of
    other keys (`security.protocol`, `sasl.mechanism`) stay readable.
    """
    return {
        key: REDACTED if _SECRET_KEY.search(key) else str(value) for key, value in options.items()
    }


@dataclass(frozen=True)
class KafkaSource:
    """A Kafka topic, or every topic matching `pattern`, read from `bootstrap_servers`.

    `starting_offsets` applies when a stream starts without a checkpoint: `earliest`, `latest`
    or Spark's JSON (`{"topic": {"0": 42}}`, -2 = earliest, -1 = latest). `options` are Kafka
    client settings, passed to the connector as `kafka.<key>`.
    """

    bootstrap_servers: str
    topic: str | None = None
    pattern: str | None = None
    starting_offsets: str = "earliest"
    value_format: ValueFormat = "json"
    options: Mapping[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None

    def __post_init__(self) -> None:
        servers = [s.strip() for s in str(self.bootstrap_servers).split(",")]
        if not all(_SERVER.fullmatch(server) for server in servers):
            raise ConfigError(
                f"bootstrap_servers {shorten(self.bootstrap_servers)}: "
                "use host:port[,host:port...]",
                key="bootstrap_servers",
            )
        if (self.topic is None) == (self.pattern is None):
            raise ConfigError("a Kafka source needs exactly one of topic and pattern", key="topic")
        if self.topic is not None and not _TOPIC.fullmatch(self.topic):
            raise ConfigError(
                f"invalid Kafka topic {shorten(self.topic)}: use 1-249 letters, digits, '.', "
                "'_', '-'",
                key="topic",
            )
        if self.pattern is not None and not self.pattern.strip():
            raise ConfigError("the Kafka topic pattern is empty", key="pattern")
        if self.value_format not in get_args(ValueFormat):
            raise ConfigError(
                f"unsupported Kafka value format {shorten(self.value_format)}: "
                f"use one of {get_args(ValueFormat)}",
                key="value_format",
            )
        try:
            _check_starting_offsets(self.starting_offsets)
        except ConfigError as exc:
            raise ConfigError(str(exc), key="starting_offsets") from None
        for key in self.options:
            bare = key.removeprefix("kafka.")
            if bare != key:
                raise ConfigError(
                    f"Kafka option {shorten(key)}: leave out the 'kafka.' prefix",
                    key=("options", key),
                )
            if bare in _RESERVED_OPTIONS:
                raise ConfigError(
                    f"Kafka option {shorten(key)} is set by the source itself",
                    key=("options", key),
                )
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger < 1:
            raise ConfigError(
                "max_offsets_per_trigger must be at least 1", key="max_offsets_per_trigger"
            )

    def __repr__(self) -> str:
        return (
            f"KafkaSource(bootstrap_servers={self.bootstrap_servers!r}, topic={self.topic!r}, "
            f"pattern={self.pattern!r}, starting_offsets={self.starting_offsets!r}, "
            f"value_format={self.value_format!r}, options={redact_options(self.options)!r}, "
            f"max_offsets_per_trigger={self.max_offsets_per_trigger!r})"
        )

    def describe(self) -> dict[str, Any]:
        """The source record stored in each batch's ledger entry (with the batch's offsets).

        Option values are redacted (`redact_options`): the ledger is readable by anyone who can
        read the table's log.
        """
        record: dict[str, Any] = {
            "kind": "kafka",
            "bootstrap_servers": self.bootstrap_servers,
            "value_format": self.value_format,
        }
        if self.topic is not None:
            record["topic"] = self.topic
        else:
            record["pattern"] = self.pattern
        if self.options:
            record["options"] = redact_options(self.options)
        return record

    def connector_options(self) -> dict[str, str]:
        """The options for `format("kafka")`: servers, subscription, client settings."""
        options = {f"kafka.{key}": value for key, value in self.client_options().items()}
        options["kafka.bootstrap.servers"] = self.bootstrap_servers
        if self.topic is not None:
            options["subscribe"] = self.topic
        else:
            options["subscribePattern"] = str(self.pattern)
        options["failOnDataLoss"] = "true"
        return options

    def client_options(self) -> dict[str, str]:
        """The Kafka client settings, with Kafka's environment-variable config provider switched
        on when a value refers to one (`${env:NAME}`), so secrets can stay out of the config."""
        options = {key: str(value) for key, value in self.options.items()}
        if any(_ENV_REFERENCE in value for value in options.values()):
            options = {**ENV_CONFIG_PROVIDER, **options}
        return options

    def client_properties(self) -> dict[str, str]:
        """Kafka client properties for an admin client of this source's cluster."""
        return {**self.client_options(), "bootstrap.servers": self.bootstrap_servers}


def _check_starting_offsets(text: str) -> None:
    if text in ("earliest", "latest"):
        return
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    valid = isinstance(parsed, dict) and all(
        isinstance(partitions, dict)
        and all(
            isinstance(offset, int) and not isinstance(offset, bool) and offset >= -2
            for offset in partitions.values()
        )
        for partitions in parsed.values()
    )
    if not valid:
        raise ConfigError(
            "starting_offsets must be 'earliest', 'latest' or JSON such as "
            '{"topic": {"0": 42}} (-2 = earliest, -1 = latest)'
        )


def check_schema(source: KafkaSource, schema: StructType) -> None:
    """Raise ConfigError if `schema` cannot hold the source's values.

    `raw` sources land the key and the value as strings: the schema must be exactly
    `key STRING, value STRING` (in either order), plus any of the `METADATA_COLUMNS`.
    """
    if source.value_format == "raw":
        found = {f.name: f.dataType for f in schema.fields if f.name not in METADATA_COLUMNS}
        if found != _RAW_SCHEMA:
            raise ConfigError(
                "a Kafka source with value_format 'raw' needs the schema "
                f"'key STRING, value STRING', not {schema.simpleString()!r}"
            )


def read_kafka_stream(
    spark: SparkSession,
    source: KafkaSource,
    schema: StructType,
    *,
    starting_offsets_json: str | None = None,
) -> DataFrame:
    """Open the source as a stream of rows with the table schema plus the Kafka columns.

    `starting_offsets_json` overrides `source.starting_offsets` (e.g. `next_offsets` of the
    ledger). Like any starting offsets, it applies only when the checkpoint is new: a checkpoint
    that exists resumes where it stopped.
    """
    check_schema(source, schema)
    starting = starting_offsets_json or source.starting_offsets
    _check_starting_offsets(starting)
    reader = spark.readStream.format("kafka").options(**source.connector_options())
    reader = reader.option("startingOffsets", starting)
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_trigger))
    return _rows(reader.load(), source, schema)


def read_kafka_range(
    spark: SparkSession, source: KafkaSource, schema: StructType, ranges: OffsetRanges
) -> DataFrame:
    """Read exactly the given offset ranges (both ends inclusive) as one batch.

    Raises TerminalError, before anything is read, if Kafka no longer holds some of the offsets
    (retention or a record deletion moved the partition's earliest offset past them, or the
    topic is gone). `failOnDataLoss` stays on, so offsets removed after this check fail the
    read rather than being skipped.
    """
    check_schema(source, schema)
    wanted = _checked_ranges(ranges)
    if not wanted:
        raise ConfigError("no offset ranges to read")
    assert_in_kafka(spark, source, wanted)
    options = source.connector_options()
    options.pop("subscribe", None)
    options.pop("subscribePattern", None)
    assign = {topic: sorted(int(p) for p in parts) for topic, parts in wanted.items()}
    starting = {t: {p: bounds[0] for p, bounds in parts.items()} for t, parts in wanted.items()}
    ending = {t: {p: bounds[1] + 1 for p, bounds in parts.items()} for t, parts in wanted.items()}
    frame = (
        spark.read.format("kafka")
        .options(**options)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )
    return _rows(frame, source, schema)


def _rows(frame: DataFrame, source: KafkaSource, schema: StructType) -> DataFrame:
    """Kafka's key/value records as the table's columns, then the Kafka coordinates."""
    coordinates = [
        F.col("topic").alias(TOPIC_COLUMN),
        F.col("partition").alias(PARTITION_COLUMN),
        F.col("offset").alias(OFFSET_COLUMN),
        F.col("timestamp").alias(TIMESTAMP_COLUMN),
        F.col("key").cast("string").alias(KEY_COLUMN),
    ]
    if source.value_format == "raw":
        framed = frame.select("key", "value", *coordinates)
        return framed.select(*_data_columns(schema, F.col), *KAFKA_COLUMNS)
    # The value's bytes as a string without decoding: bytes that are not UTF-8 stay exact.
    value = F.col("value").cast("string")
    values = StructType([f for f in schema.fields if f.name not in METADATA_COLUMNS])
    parsed = json_records(frame, value, values, coordinates, detect_files=False)
    reader = [CORRUPT_COLUMN, RECORD_COLUMN, FAULT_COLUMN, RESCUE_INPUT_COLUMN]
    return parsed.select(*_data_columns(schema, F.col), *reader, *KAFKA_COLUMNS)


def _data_columns(schema: StructType, from_value: Callable[[str], Column]) -> list[Column]:
    """The table's columns: metadata columns from the coordinates, the others from the value."""
    return [
        F.col(METADATA_COLUMNS[f.name]).cast(f.dataType).alias(f.name)
        if f.name in METADATA_COLUMNS
        else from_value(f.name).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]


def offset_ranges(batch: DataFrame) -> OffsetRanges:
    """The offsets a batch of Kafka rows covers: topic -> partition -> [first, last].

    One aggregation over the Kafka columns. Partitions without rows in the batch are absent.
    """
    rows = (
        batch.groupBy(TOPIC_COLUMN, PARTITION_COLUMN)
        .agg(F.min(OFFSET_COLUMN).alias("first"), F.max(OFFSET_COLUMN).alias("last"))
        .collect()
    )
    ranges: OffsetRanges = {}
    for row in sorted(rows, key=lambda r: (r[TOPIC_COLUMN], r[PARTITION_COLUMN])):
        ranges.setdefault(row[TOPIC_COLUMN], {})[str(row[PARTITION_COLUMN])] = [
            int(row["first"]),
            int(row["last"]),
        ]
    return ranges


def merge_ranges(batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]]) -> OffsetRanges:
    """Several batches' ranges as one: per partition, the smallest first and largest last."""
    merged: OffsetRanges = {}
    for ranges in batches:
        for topic, partitions in _checked_ranges(ranges).items():
            for partition, (first, last) in partitions.items():
                known = merged.setdefault(topic, {}).get(partition)
                merged[topic][partition] = (
                    [first, last] if known is None else [min(known[0], first), max(known[1], last)]
                )
    return merged


def next_offsets(
    batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]],
    *,
    partitions: Mapping[str, Iterable[int]] | None = None,
) -> str:
    """Spark `startingOffsets` JSON resuming after the recorded ranges: last offset + 1.

    `batches` are the ranges of the ledger's batches, in any order. Spark needs an offset for
    every partition of a topic named in the JSON: `partitions` (topic -> partition numbers)
    adds those that no batch covered, at -2 (earliest).
    """
    merged = merge_ranges(batches)
    if not merged:
        raise ValueError("no recorded offset ranges to resume after")
    offsets: dict[str, dict[str, int]] = {
        topic: {p: bounds[1] + 1 for p, bounds in parts.items()} for topic, parts in merged.items()
    }
    for topic, numbers in (partitions or {}).items():
        for number in numbers:
            offsets.setdefault(topic, {}).setdefault(str(number), -2)
    return json.dumps(
        {t: dict(sorted(p.items(), key=lambda kv: int(kv[0]))) for t, p in sorted(offsets.items())},
        separators=(",", ":"),
    )


@dataclass(frozen=True)
class RangeProblem:
    """Offsets of one partition that consecutive batches skipped (gap) or read twice (overlap)."""

    topic: str
    partition: str
    kind: Literal["gap", "overlap"]
    batch: int  # position of the later batch in the checked sequence
    expected_first: int  # the earlier batch's last offset + 1
    actual_first: int

    def __str__(self) -> str:
        if self.kind == "gap":
            what = f"offsets {self.expected_first}-{self.actual_first - 1} were skipped"
        else:
            what = f"offsets {self.actual_first}-{self.expected_first - 1} were read again"
        return f"{self.topic} partition {self.partition}, batch #{self.batch}: {what}"


def gaps(batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]]) -> list[RangeProblem]:
    """Where consecutive batches' ranges (in batch order) do not meet, per partition.

    A batch that holds no rows of a partition is passed over: the next batch that does must
    start right after the last one that did.
    """
    last_seen: dict[tuple[str, str], int] = {}
    problems: list[RangeProblem] = []
    for position, ranges in enumerate(batches):
        for topic, partitions in sorted(_checked_ranges(ranges).items()):
            for partition, (first, last) in sorted(partitions.items()):
                previous = last_seen.get((topic, partition))
                if previous is not None and first != previous + 1:
                    kind: Literal["gap", "overlap"] = "gap" if first > previous + 1 else "overlap"
                    problems.append(
                        RangeProblem(topic, partition, kind, position, previous + 1, first)
                    )
                last_seen[(topic, partition)] = max(
                    last, previous if previous is not None else last
                )
    return problems


def are_contiguous(batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]]) -> bool:
    """True if, per partition, each batch starts right after the previous batch's last offset."""
    return not gaps(batches)


def _checked_ranges(ranges: Mapping[str, Mapping[str, Sequence[int]]]) -> OffsetRanges:
    checked: OffsetRanges = {}
    for topic, partitions in ranges.items():
        for partition, bounds in partitions.items():
            if (
                len(bounds) != 2
                or not all(isinstance(b, int) and b >= 0 for b in bounds)
                or bounds[0] > bounds[1]
                or not str(partition).isdigit()
            ):
                raise ConfigError(
                    f"bad offset range for {topic} partition {partition}: {list(bounds)!r} "
                    "(want [first, last] with 0 <= first <= last)"
                )
            checked.setdefault(str(topic), {})[str(partition)] = [int(bounds[0]), int(bounds[1])]
    return checked


def assert_in_kafka(spark: SparkSession, source: KafkaSource, wanted: OffsetRanges) -> None:
    """Raise TerminalError naming the ranges Kafka no longer (or not yet) holds."""
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
