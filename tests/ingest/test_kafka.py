"""The Kafka source against a real single-node Kafka broker (KRaft), started from Kafka's JARs.

The pure helpers (validation, redaction, offset arithmetic) are tested without Spark. The rest
(marked `slow`: a broker JVM beside Spark) uses the run's one broker (the `broker` fixture of
tests/conftest.py, shared with test_cdc.py; `tests/support/kafka_broker.py`) and the shared
`spark` session, which must carry Spark's Kafka connector.
"""

from __future__ import annotations

import itertools
import json
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.config import PipelineSpec
from ingest.runner import RunOptions, run_pipeline
from ingest.sources.kafka import KafkaSource, redact_options
from ingest.sources.kafka_read import (
    KAFKA_COLUMNS,
    kafka_rows,
    offset_ranges,
    read_kafka_range,
    read_kafka_stream,
)
from ingest.sources.offsets import are_contiguous, gaps, merge_ranges, next_offsets
from quality.records import CORRUPT_COLUMN
from tables.delta.history import read_ledger
from tables.delta.writer import TableWriter
from tables.errors import CheckpointLostError, ConfigError, TerminalError
from tables.record_rules import RecordRules
from tables.spec import TableSpec, parse_struct
from tests.support import kafka_broker
from tests.support.kafka_broker import KafkaBroker, KafkaBrokerError
from tests.support.processes import run_lakehouse
from tests.support.projects import table_location

SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("amount", DoubleType()),
    ]
)
SCHEMA_DDL = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"
RAW_SCHEMA = StructType([StructField("key", StringType()), StructField("value", StringType())])
SECRET = "s3cr3t-hunter2"
_topics = itertools.count()


# -- pure helpers -----------------------------------------------------------------------------


def test_redact_options_hides_every_secret_value() -> None:
    options = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'PlainLoginModule required username="u" password="{SECRET}";',
        "ssl.keystore.password": SECRET,
        "SSL.KEY.PASSWORD": SECRET,
        "ssl.truststore.password": SECRET,
        "ssl.keystore.key": SECRET,
        "sasl.oauthbearer.client.credentials.client.secret": SECRET,
    }

    redacted = redact_options(options)

    assert redacted["security.protocol"] == "SASL_SSL"
    assert redacted["sasl.mechanism"] == "PLAIN"
    assert SECRET not in json.dumps(redacted)
    assert set(redacted) == set(options)
    assert options["ssl.keystore.password"] == SECRET  # the input is left alone


def test_describe_and_repr_never_show_secrets() -> None:
    source = KafkaSource(
        "broker-1:9093,broker-2:9093",
        topic="events",
        options={"security.protocol": "SASL_SSL", "sasl.jaas.config": SECRET},
    )

    record = source.describe()

    assert record == {
        "kind": "kafka",
        "bootstrap_servers": "broker-1:9093,broker-2:9093",
        "topic": "events",
        "value_format": "json",
        "options": {"security.protocol": "SASL_SSL", "sasl.jaas.config": "***"},
    }
    assert SECRET not in repr(source)
    assert source.connector_options()["kafka.sasl.jaas.config"] == SECRET


def test_connector_options() -> None:
    options = KafkaSource("h:1", pattern="events-.*", options={"fetch.min.bytes": "1"})

    assert options.connector_options() == {
        "kafka.bootstrap.servers": "h:1",
        "kafka.fetch.min.bytes": "1",
        "subscribePattern": "events-.*",
        "failOnDataLoss": "true",
    }
    assert options.describe()["pattern"] == "events-.*"


def test_env_references_switch_on_kafkas_env_config_provider() -> None:
    source = KafkaSource("h:1", topic="t", options={"sasl.jaas.config": "${env:JAAS}"})

    options = source.connector_options()

    assert options["kafka.config.providers"] == "env"
    assert options["kafka.config.providers.env.class"].endswith("EnvVarConfigProvider")
    assert options["kafka.sasl.jaas.config"] == "${env:JAAS}"
    assert source.client_properties()["config.providers"] == "env"
    assert "config.providers" not in KafkaSource("h:1", topic="t").connector_options()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of topic and pattern"),
        ({"topic": "a", "pattern": "b"}, "exactly one of topic and pattern"),
        ({"topic": "bad topic"}, "invalid Kafka topic"),
        ({"topic": "t", "bootstrap_servers": "no-port"}, "bootstrap_servers"),
        ({"topic": "t", "value_format": "avro"}, "unsupported Kafka value format"),
        ({"topic": "t", "starting_offsets": "first"}, "starting_offsets must be"),
        ({"topic": "t", "starting_offsets": '{"t": {"0": "x"}}'}, "starting_offsets must be"),
        ({"topic": "t", "options": {"kafka.acks": "1"}}, "leave out the 'kafka.' prefix"),
        ({"topic": "t", "options": {"auto.offset.reset": "x"}}, "set by the source itself"),
        ({"topic": "t", "max_offsets_per_trigger": 0}, "max_offsets_per_trigger"),
    ],
)
def test_invalid_sources_fail_with_one_line(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"bootstrap_servers": "127.0.0.1:9092", **kwargs}
    with pytest.raises(ConfigError, match=message) as error:
        KafkaSource(**settings)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


def test_next_offsets_resume_after_the_largest_recorded_offset() -> None:
    batches = [
        {"events": {"0": [0, 4], "1": [0, 2]}},
        {"events": {"0": [5, 9]}},
        {"other": {"0": [10, 10]}},
    ]

    assert json.loads(next_offsets(batches)) == {
        "events": {"0": 10, "1": 3},
        "other": {"0": 11},
    }
    assert json.loads(next_offsets(batches, partitions={"events": [0, 1, 2]})) == {
        "events": {"0": 10, "1": 3, "2": -2},
        "other": {"0": 11},
    }
    assert merge_ranges(batches)["events"] == {"0": [0, 9], "1": [0, 2]}
    with pytest.raises(ValueError, match="no recorded offset ranges"):
        next_offsets([])


def test_contiguity_per_partition() -> None:
    contiguous = [
        {"t": {"0": [0, 4], "1": [0, 0]}},
        {"t": {"0": [5, 5]}},  # partition 1 has nothing in this batch
        {"t": {"0": [6, 8], "1": [1, 3]}},
    ]
    assert are_contiguous(contiguous)
    assert gaps([]) == []

    problems = gaps([{"t": {"0": [0, 4]}}, {"t": {"0": [7, 9]}}, {"t": {"0": [8, 12]}}])

    assert [(p.kind, p.batch, p.expected_first, p.actual_first) for p in problems] == [
        ("gap", 1, 5, 7),
        ("overlap", 2, 10, 8),
    ]
    assert str(problems[0]) == "t partition 0, batch #1: offsets 5-6 were skipped"
    assert str(problems[1]) == "t partition 0, batch #2: offsets 8-9 were read again"
    assert not are_contiguous([{"t": {"0": [0, 4]}}, {"t": {"0": [7, 9]}}])


@pytest.mark.parametrize("bounds", [[5, 4], [-1, 3], [1], [0, 1.5]])
def test_bad_ranges_are_config_errors(bounds: list[object]) -> None:
    with pytest.raises(ConfigError, match="bad offset range for t partition 0"):
        are_contiguous([{"t": {"0": bounds}}])  # type: ignore[dict-item]


# -- against a real broker --------------------------------------------------------------------


@pytest.fixture
def topic(broker: KafkaBroker) -> Callable[..., str]:
    """Create a fresh topic and return its name."""

    def make(partitions: int = 1) -> str:
        name = f"events-{next(_topics)}"
        broker.create_topic(name, partitions)
        return name

    return make


def event(i: int) -> tuple[str, str]:
    return f"k{i}", json.dumps({"event_id": f"e{i}", "user_id": "u", "amount": float(i)})


def run_available_now(frame: DataFrame, checkpoint: Path, handle: Callable[..., None]) -> None:
    query = (
        frame.writeStream.foreachBatch(handle)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(120):
            raise AssertionError("the stream did not finish within 120 s")
    finally:
        query.stop()


@pytest.mark.slow
def test_broker_starts_serves_and_stops(tmp_path: Path) -> None:
    with KafkaBroker(tmp_path) as running:
        host, port = running.bootstrap.split(":")
        assert host == "127.0.0.1"
        socket.create_connection((host, int(port)), timeout=5).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()
    assert "Kafka Server started" in (tmp_path / "broker.log").read_text()
    running.stop()  # stopping twice is harmless


@pytest.mark.slow
def test_broker_that_cannot_start_reports_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free = kafka_broker._free_ports(1)[0]
        monkeypatch.setattr(
            kafka_broker, "_free_ports", lambda count: [taken.getsockname()[1], free]
        )
        broken = KafkaBroker(tmp_path, startup_timeout=60)
        with pytest.raises(KafkaBrokerError, match="exited with code") as error:
            broken.start()
    assert f"last lines of {tmp_path / 'broker.log'}:" in str(error.value)
    assert "Address already in use" in str(error.value)


@pytest.mark.slow
def test_stream_reads_json_and_malformed_values_with_their_offsets(
    spark: SparkSession, broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=2)
    broker.produce(name, [event(i) for i in range(6)], partition=0)
    malformed = [(None, "not json"), ("k8", '{"event_id": "e8", "amount": "x"}'), ("k9", "")]
    broker.produce(name, [event(6), *malformed], partition=1)
    source = KafkaSource(broker.bootstrap, topic=name, max_offsets_per_trigger=5)
    seen: list[dict[str, dict[str, list[int]]]] = []
    rows: list[dict[str, object]] = []

    def handle(raw: DataFrame, batch_id: int) -> None:
        batch = kafka_rows(raw, source, SCHEMA)  # the stream hands raw records over
        seen.append(offset_ranges(batch))
        rows.extend(r.asDict() for r in batch.collect())

    run_available_now(read_kafka_stream(spark, source, SCHEMA), tmp_path / "cp", handle)

    assert len(rows) == 10
    assert len(seen) == 2  # 10 offsets, at most 5 per trigger
    assert are_contiguous(seen)
    assert merge_ranges(seen) == {name: {"0": [0, 5], "1": [0, 3]}}
    assert json.loads(next_offsets(seen)) == {name: {"0": 6, "1": 4}}
    by_offset = {(r["_lh_kafka_partition"], r["_lh_kafka_offset"]): r for r in rows}
    good = by_offset[(0, 2)]
    assert (good["event_id"], good["amount"], good[CORRUPT_COLUMN]) == ("e2", 2.0, None)
    assert (good["_lh_kafka_topic"], good["_lh_kafka_key"]) == (name, "k2")
    assert good["_lh_kafka_timestamp"] is not None
    for offset, (_, raw) in enumerate(malformed, start=1):
        bad = by_offset[(1, offset)]
        assert bad[CORRUPT_COLUMN] == raw
        assert (bad["event_id"], bad["user_id"], bad["amount"]) == (None, None, None)


@pytest.mark.slow
def test_a_kafka_batch_commits_with_its_offsets_and_no_secret_in_the_ledger(
    spark: SparkSession,
    broker: KafkaBroker,
    topic: Callable[..., str],
    make_table: Callable[..., TableSpec],
) -> None:
    name = topic()
    broker.produce(name, [event(0), event(1), (None, "not json"), event(2)])
    # The password is unused on PLAINTEXT (the client only warns); it must not be recorded.
    source = KafkaSource(broker.bootstrap, topic=name, options={"ssl.key.password": SECRET})
    spec = make_table(schema="event_id STRING NOT NULL, user_id STRING, amount DOUBLE")
    batch = read_kafka_range(spark, source, SCHEMA, {name: {"0": [0, 3]}})
    ranges = offset_ranges(batch)

    result = commit_batch(
        TableWriter(spark, spec, "kafka-app"),
        0,
        batch.drop(*KAFKA_COLUMNS),
        CommitOptions(source={**source.describe(), "offsets": ranges}),
    )

    assert (result.status, result.rows_inserted, result.rows_quarantined) == ("committed", 3, 1)
    (entry,) = read_ledger(spark, spec.name)
    assert entry.meta.source["offsets"] == {name: {"0": [0, 3]}}
    assert entry.meta.source["options"] == {"ssl.key.password": "***"}
    history = spark.sql(f"DESCRIBE HISTORY {spec.name}").select("userMetadata").collect()
    assert SECRET not in json.dumps([r.userMetadata for r in history])


@pytest.mark.slow
def test_read_kafka_range_reads_exactly_the_range(
    spark: SparkSession, broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    broker.produce(name, [event(i) for i in range(10)], partition=0)
    broker.produce(name, [event(i) for i in range(10, 13)], partition=1)
    source = KafkaSource(broker.bootstrap, topic=name)
    wanted = {name: {"0": [3, 7], "1": [0, 2]}}

    frame = read_kafka_range(spark, source, SCHEMA, wanted)

    assert offset_ranges(frame) == wanted
    assert frame.count() == 8
    assert sorted(r.event_id for r in frame.where("_lh_kafka_partition = 0").collect()) == [
        f"e{i}" for i in range(3, 8)
    ]


@pytest.mark.slow
def test_kafka_coordinates_fill_the_columns_named_for_them(
    spark: SparkSession, broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic()
    broker.produce(name, [event(0), event(1)])
    schema = parse_struct(
        "event_id STRING, kafka_key STRING, kafka_topic STRING, kafka_partition INT, "
        "kafka_offset BIGINT, kafka_timestamp TIMESTAMP"
    )
    source = KafkaSource(broker.bootstrap, topic=name)

    rows = read_kafka_range(spark, source, schema, {name: {"0": [0, 1]}}).orderBy("kafka_offset")

    got = [r.asDict() for r in rows.collect()]
    assert [(r["event_id"], r["kafka_key"], r["kafka_offset"]) for r in got] == [
        ("e0", "k0", 0),
        ("e1", "k1", 1),
    ]
    assert {(r["kafka_topic"], r["kafka_partition"]) for r in got} == {(name, 0)}
    assert all(r["kafka_timestamp"] is not None for r in got)
    raw = parse_struct("key STRING, value STRING, kafka_offset BIGINT")
    raw_source = KafkaSource(broker.bootstrap, topic=name, value_format="raw")
    frame = read_kafka_range(spark, raw_source, raw, {name: {"0": [1, 1]}})
    assert [(r.key, r.kafka_offset) for r in frame.collect()] == [("k1", 1)]


@pytest.mark.slow
def test_raw_values_keep_key_and_value_text(
    spark: SparkSession, broker: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic()
    broker.produce(name, [("k", "plain text"), (None, "{}")])
    source = KafkaSource(broker.bootstrap, topic=name, value_format="raw")
    frame = read_kafka_range(spark, source, RAW_SCHEMA, {name: {"0": [0, 1]}})

    assert [tuple(r)[:2] for r in frame.orderBy("_lh_kafka_offset").collect()] == [
        ("k", "plain text"),
        (None, "{}"),
    ]
    with pytest.raises(ConfigError, match="needs the schema 'key STRING, value STRING'"):
        read_kafka_range(spark, source, SCHEMA, {name: {"0": [0, 1]}})


@pytest.mark.slow
def test_offsets_removed_from_kafka_give_a_clear_error(
    spark: SparkSession, broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic()
    broker.produce(name, [event(i) for i in range(10)])
    broker.delete_records(name, {0: 6})  # what retention does: the earliest offset moves to 6
    assert broker.earliest_offsets(name) == {0: 6}
    source = KafkaSource(broker.bootstrap, topic=name)

    with pytest.raises(TerminalError) as error:
        read_kafka_range(spark, source, SCHEMA, {name: {"0": [2, 8]}})

    message = str(error.value)
    assert "\n" not in message
    assert f"{name} partition 0 offsets 2-5 are gone (earliest available is 6)" in message
    assert read_kafka_range(spark, source, SCHEMA, {name: {"0": [6, 9]}}).count() == 4
    with pytest.raises(TerminalError, match="partition 0 ends at offset 9, before 12"):
        read_kafka_range(spark, source, SCHEMA, {name: {"0": [6, 12]}})
    with pytest.raises(TerminalError, match="missing-topic partition 0 does not exist"):
        read_kafka_range(spark, source, SCHEMA, {"missing-topic": {"0": [0, 1]}})

    # A stream resuming at removed offsets stops (failOnDataLoss) instead of skipping them.
    stream = read_kafka_stream(
        spark, source, SCHEMA, starting_offsets_json=f'{{"{name}":{{"0":2}}}}'
    )
    with pytest.raises(Exception, match="data may have been lost"):
        run_available_now(stream, tmp_path / "cp", lambda batch, batch_id: batch.count())


@pytest.mark.slow
def test_long_and_deep_json_values_meet_the_fates_of_file_lines_through_the_broker(
    spark: SparkSession,
    broker: KafkaBroker,
    topic: Callable[..., str],
    make_table: Callable[..., TableSpec],
    tmp_path: Path,
) -> None:
    """Values of 2,000 and 800,000 characters, 1,001 levels deep, single-quoted, past the limit.

    The broker's own limit on a message is about 1 MiB, so the table's limit is set below it.
    """
    spec = make_table(schema=SCHEMA_DDL, records=RecordRules(max_record_bytes=900_000))
    name = topic()
    values = [
        json.dumps({"event_id": "short", "user_id": "u" * 2000}),
        json.dumps({"event_id": "long", "user_id": "\\" * 400_000}),
        '{"event_id": "deep", "x": ' + "[" * 1001 + "]" * 1001 + "}",
        "{'event_id': 'quoted'}",
        json.dumps({"event_id": "past", "user_id": "y" * 950_000}),
    ]
    broker.produce(name, [(f"k{i}", v) for i, v in enumerate(values)])
    source = KafkaSource(broker.bootstrap, topic=name)
    job = kafka_job(tmp_path, spec, source, "long-values")

    report = run_pipeline(spark, job, spec)

    assert (report.rows_inserted, report.rows_quarantined) == (2, 3)
    landed = {r["event_id"]: len(r["user_id"]) for r in spark.table(spec.name).collect()}
    assert landed == {"short": 2000, "long": 400_000}
    reasons = sorted(r["_lh_reason"][:40] for r in spark.table(spec.quarantine_name).collect())
    assert reasons == [
        "malformed JSON: nested more than 1,000 l",
        "malformed JSON: not valid JSON (truncate",
        "record too large: 950,035 bytes, over th",
    ]


# -- the Kafka pipeline: stream runner, resume from the log, a killed process -----------------


def kafka_job(tmp_path: Path, spec: TableSpec, source: KafkaSource, app_id: str) -> PipelineSpec:
    return PipelineSpec(
        name=app_id,
        table=spec.name,
        app_id=app_id,
        source=source,
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoints" / app_id),
    )


def ledger_ranges(spark: SparkSession, table: str, app_id: str) -> list[dict[str, object]]:
    entries = sorted(read_ledger(spark, table, app_id=app_id), key=lambda e: e.meta.batch_id)
    return [dict(e.meta.source["offsets"]) for e in entries if e.meta.kind == "batch"]


def assert_each_event_once(spark: SparkSession, table: str, count: int) -> None:
    ids = [r[0] for r in spark.table(table).select("event_id").collect()]
    assert sorted(ids) == sorted(f"e{i}" for i in range(count))


@pytest.mark.slow
def test_a_retrying_producer_and_a_lost_checkpoint_still_land_each_message_once(
    spark: SparkSession,
    broker: KafkaBroker,
    topic: Callable[..., str],
    make_table: Callable[..., TableSpec],
    tmp_path: Path,
) -> None:
    name = topic(partitions=2)
    first = [event(i) for i in range(30)]
    resent = [event(i) for i in (3, 4, 17)]
    broker.produce(name, first[:15] + resent[:2], partition=0)
    broker.produce(name, first[15:] + resent[2:], partition=1)
    spec = make_table(
        schema="event_id STRING NOT NULL, user_id STRING, amount DOUBLE", dedup="table"
    )
    source = KafkaSource(broker.bootstrap, topic=name, max_offsets_per_trigger=8)
    job = kafka_job(tmp_path, spec, source, "kafka-resume")

    report = run_pipeline(spark, job, spec)
    shutil.rmtree(job.checkpoint)
    broker.produce(name, [event(i) for i in range(30, 40)], partition=0)
    with pytest.raises(CheckpointLostError, match=r"checkpoint .* is empty"):
        run_pipeline(spark, job, spec)
    resumed = run_pipeline(spark, job, spec, RunOptions(resume_from_log=True))
    again = run_pipeline(spark, job, spec, RunOptions(resume_from_log=True))

    assert len(report.results) >= 4
    assert sum(r.rows_already_present for r in report.results) == 3
    assert_each_event_once(spark, spec.name, 40)
    ranges = ledger_ranges(spark, spec.name, "kafka-resume")
    assert are_contiguous(ranges), gaps(ranges)
    assert merge_ranges(ranges) == {name: {"0": [0, 26], "1": [0, 15]}}
    first_resumed = min(r.batch_id for r in resumed.results)
    assert first_resumed == max(r.batch_id for r in report.results) + 1
    assert again.results == []


KAFKA_CONFIG = """
[lakehouse]
home = ".lakehouse"

[tables.events]
schema = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"
keys = ["event_id"]
dedup = "table"

[pipelines.events]
table = "events"
app_id = "events-kafka"
[pipelines.events.source]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topic = "{topic}"
max_offsets_per_trigger = 5
[pipelines.events.source.options]
"ssl.key.password" = "{secret}"
"""


@pytest.mark.slow
def test_a_process_killed_mid_stream_restarts_without_duplicates_or_gaps(
    spark: SparkSession, broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic()
    broker.produce(name, [event(i) for i in range(20)] + [event(7)])
    config = KAFKA_CONFIG.format(bootstrap=broker.bootstrap, topic=name, secret=SECRET)
    (tmp_path / "lakehouse.toml").write_text(config)

    killed = run_lakehouse(tmp_path, "ingest", fault="after_commit:kill@1")
    restarted = run_lakehouse(tmp_path, "ingest")
    history = run_lakehouse(tmp_path, "history", "events", "--format", "json")

    assert killed.returncode == -9, killed.stderr
    assert restarted.returncode == 0, restarted.stderr
    assert "batch 1: skipped" in restarted.stderr
    table = table_location(tmp_path, "events")
    ids = [r[0] for r in spark.read.format("delta").load(table).select("event_id").collect()]
    assert sorted(ids) == sorted(f"e{i}" for i in range(20))
    batches = sorted(json.loads(history.stdout), key=lambda row: row["batch_id"])
    assert [b["source"] for b in batches][:2] == [f"kafka: {name} p0 0-4", f"kafka: {name} p0 5-9"]
    assert len(batches) == 5
    for output in (killed, restarted, history):
        assert SECRET not in output.stdout + output.stderr
    logs = (tmp_path / ".lakehouse" / "logs" / "spark-driver.log").read_text()
    assert SECRET not in logs
