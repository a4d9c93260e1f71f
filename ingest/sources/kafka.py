"""Kafka source: a topic (or pattern) read with Spark's Kafka connector, offsets in the ledger.

`KafkaSource` is the config and the `Source` of a topic: how its stream opens
(`ingest.sources.kafka_read`), what each batch records (its offset ranges, `offset_ranges`), how
a recorded batch is read again (`read_kafka_range`, after `ingest.sources.kafka_admin` checked
that Kafka still holds it), and where a stream resumes from the log (`ingest.sources.resume`).
The offset algebra is in `ingest.sources.offsets`.

Secrets: `options` are Kafka client settings (`security.protocol`, `sasl.jaas.config`,
`ssl.keystore.password`, ...). Their values reach the connector and nothing else: `describe()`
(the ledger) and `repr()` show them through `redact_options`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

from pyspark import StorageLevel

from ingest.sources.backlog import Backlog, offsets_pending
from ingest.sources.fingerprint import offsets_fingerprint, with_fingerprint
from ingest.sources.kafka_admin import available_offsets, lost_ranges
from ingest.sources.kafka_read import (
    KAFKA_COLUMNS,
    METADATA_COLUMNS,
    kafka_rows,
    offset_ranges,
    read_kafka_range,
    read_kafka_stream,
)
from ingest.sources.offsets import checked_ranges, validate_starting_offsets
from ingest.sources.resume import ResumePoint, resume_point
from tables.delta.ledger import recorded_offsets
from tables.errors import ConfigError
from tables.identifiers import shorten

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from tables.record_rules import RecordRules
    from tables.spec import TableSpec

ValueFormat = Literal["json", "raw"]

REDACTED = "***"
#: Kafka's own config provider that resolves `${env:NAME}` in client settings (Kafka >= 3.5).
ENV_CONFIG_PROVIDER = MappingProxyType(
    {
        "config.providers": "env",
        "config.providers.env.class": (
            "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
        ),
    }
)
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
            validate_starting_offsets(self.starting_offsets)
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

    @classmethod
    def from_record(cls, recorded: Mapping[str, Any]) -> KafkaSource:
        """The source a batch's ledger record names, without client options (never recorded)."""
        return cls(
            bootstrap_servers=str(recorded.get("bootstrap_servers", "")),
            topic=recorded.get("topic"),
            pattern=recorded.get("pattern"),
            value_format=recorded.get("value_format", "json"),
        )

    @property
    def kind(self) -> str:
        """`kafka`, as the ledger records it."""
        return "kafka"

    @property
    def needs_kafka(self) -> bool:
        """True: the session needs Spark's Kafka connector."""
        return True

    @property
    def location(self) -> str | None:
        """None: a topic is no file-system location."""
        return None

    @property
    def raw_format(self) -> str | None:
        """`json` for JSON values (their text is kept for quarantine), else None."""
        return "json" if self.value_format == "json" else None

    @property
    def reader_options(self) -> Mapping[str, str]:
        """No parsing options: values are parsed with the table schema alone."""
        return {}

    def validate_table_columns(self, table: str, columns: Collection[str]) -> None:
        """A `raw` source lands key and value as they are: its table holds just those (plus
        Kafka coordinate columns); the types are checked by Spark when the stream starts."""
        if self.value_format != "raw":
            return
        data = set(columns) - set(METADATA_COLUMNS)
        if data != {"key", "value"}:
            raise ConfigError(
                f"a 'raw' Kafka source needs table {table} to have the columns key and value "
                f"(STRING) and Kafka coordinate columns only, not {sorted(data)}",
                key="value_format",
            )

    def assert_present(self, spark: SparkSession) -> None:
        """Nothing to check before the stream: the connector reports a missing topic."""

    def resume_point(self, spark: SparkSession, spec: TableSpec, app_id: str) -> ResumePoint | None:
        """One past the offsets the app's ledger records, or None if it committed nothing."""
        return resume_point(spark, spec, app_id, self)

    def open_stream(
        self,
        spark: SparkSession,
        schema: StructType,
        *,
        starting_offsets: str | None = None,
        rules: RecordRules | None = None,
    ) -> DataFrame:
        """The topic as a stream of raw Kafka records (`stream_batch` parses each batch)."""
        return read_kafka_stream(spark, self, schema, starting_offsets_json=starting_offsets)

    @contextmanager
    def stream_batch(
        self, batch: DataFrame, spec: TableSpec, files: Sequence[str] | None = None
    ) -> Iterator[tuple[DataFrame, dict[str, Any]]]:
        """The raw batch parsed for the table, and a record with the offsets it covered.

        The raw batch is persisted while the block runs: the offsets (its coordinates alone,
        no parse) and the commit read it once.
        """
        cached = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            schema = spec.data_schema(batch.sparkSession)
            rows = kafka_rows(cached, self, schema, spec.records)
            offsets = offset_ranges(rows)
            record = {**self.describe(), "offsets": offsets}
            yield (
                rows.drop(*KAFKA_COLUMNS),
                with_fingerprint(record, offsets_fingerprint(offsets)),
            )
        finally:
            cached.unpersist()

    def read_recorded(
        self,
        spark: SparkSession,
        schema: StructType,
        recorded: Mapping[str, Any],
        rules: RecordRules | None = None,
    ) -> DataFrame:
        """Exactly the offset ranges the record names, without the Kafka columns."""
        ranges = checked_ranges(recorded_offsets(recorded) or {})
        return read_kafka_range(spark, self, schema, ranges, rules).drop(*KAFKA_COLUMNS)

    def missing(self, spark: SparkSession, recorded: Mapping[str, Any]) -> list[str]:
        """The recorded offset ranges Kafka no longer (or not yet) holds."""
        return lost_ranges(spark, self, checked_ranges(recorded_offsets(recorded) or {}))

    def backlog(self, spark: SparkSession, recorded: Sequence[Mapping[str, Any]]) -> Backlog:
        """Offsets of the topic past the recorded ranges (asked of the cluster once).

        A pattern's topics are known only once the stream runs: its backlog is not known.
        """
        if self.topic is None:
            return Backlog("offsets", None)
        ranges = [r for record in recorded if (r := recorded_offsets(record)) is not None]
        available = available_offsets(spark, self, [self.topic])
        from_earliest = self.starting_offsets != "latest"
        return Backlog("offsets", offsets_pending(ranges, available, from_earliest=from_earliest))
