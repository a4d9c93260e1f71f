"""No record stops a pipeline: every size and shape lands, lands with rescue, or is quarantined.

The classes of `tests/support/shapes.py` go through the JSON file reader and the Kafka value
parse (the same records), and the CSV classes through the CSV split, committed into real Delta
tables; each record's fate is asserted. A value of 2,000 characters used to kill the driver JVM
(`java.util.regex` recursing once per character). The pure scans run without Spark.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.sources.files import FileSource, read_files
from ingest.sources.kafka import KafkaSource
from ingest.sources.kafka_read import KAFKA_COLUMNS, kafka_rows
from quality.malformed import unparsed_reason
from quality.records import CORRUPT_COLUMN
from quality.rescue import parse_failure, parser_limit, rescued_json, top_level_members
from tables.delta.writer import TableWriter
from tables.record_rules import RecordRules
from tables.spec import TableSpec, parse_struct
from tests.support.shapes import MIB, SHAPE_SCHEMA, Shape, csv_shapes, json_shapes

MakeTable = Callable[..., TableSpec]


def assert_fates(spark: SparkSession, spec: TableSpec, shapes: Sequence[Shape]) -> None:
    landed = {r["id"]: r for r in spark.table(spec.name).collect()}
    quarantined = spark.table(spec.quarantine_name).collect()
    for shape in shapes:
        if shape.fate == "quarantined":
            head = shape.raw[:200].decode()
            found = [r for r in quarantined if (r["_lh_raw"] or "").startswith(head)]
            assert len(found) == 1, shape.cls
            assert found[0]["_lh_reason"].startswith(shape.reason or "?"), (
                shape.cls,
                found[0]["_lh_reason"],
            )
            assert shape.cls not in landed
            continue
        row = landed[shape.cls]
        if shape.note is not None:
            assert row["note"] == shape.note, shape.cls
        if shape.fate == "landed":
            assert row["_lh_rescued"] is None, shape.cls
        else:
            assert (row["_lh_rescued"] or "").startswith(shape.rescued_start or "?"), (
                shape.cls,
                (row["_lh_rescued"] or "")[:80],
            )


def counts(result: BatchResult) -> tuple[int, int, int]:
    return result.rows_read, result.rows_inserted, result.rows_quarantined


def expected_counts(shapes: Sequence[Shape]) -> tuple[int, int, int]:
    rejected = sum(s.fate == "quarantined" for s in shapes)
    return len(shapes), len(shapes) - rejected, rejected


def test_every_size_and_shape_meets_its_fate_from_a_json_file(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SHAPE_SCHEMA, keys=("id",))
    shapes = json_shapes()
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "shapes.json").write_bytes(b"\n".join(s.raw for s in shapes) + b"\n")
    source = FileSource(str(landing), "json")
    batch = read_files(
        spark, source, spec.data_schema(spark), [str(landing / "shapes.json")], spec.records
    )

    result = commit_batch(
        TableWriter(spark, spec, "shapes"), 0, batch, CommitOptions(raw_format="json")
    )

    assert counts(result) == expected_counts(shapes)
    assert_fates(spark, spec, shapes)
    past = [r for r in spark.table(spec.quarantine_name).collect() if "line 4 " in r["_lh_reason"]]
    assert len(past) == 1, "the line past the limit names its line number"


def test_every_size_and_shape_meets_the_same_fate_as_a_kafka_value(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table(schema=SHAPE_SCHEMA, keys=("id",))
    shapes = json_shapes()
    frame = spark.createDataFrame(
        [(b"k", s.raw, "topic", 0, n, None) for n, s in enumerate(shapes)],
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    source = KafkaSource(bootstrap_servers="localhost:9092", topic="topic")
    batch = kafka_rows(frame, source, spec.data_schema(spark), spec.records).drop(*KAFKA_COLUMNS)

    result = commit_batch(
        TableWriter(spark, spec, "kafka-shapes"), 0, batch, CommitOptions(raw_format="json")
    )

    assert counts(result) == expected_counts(shapes)
    assert_fates(spark, spec, shapes)


def test_csv_records_long_quoted_fields_land_exactly_and_one_past_the_limit_is_quarantined(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema="id STRING NOT NULL, note STRING", keys=("id",))
    shapes = csv_shapes()
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.csv").write_bytes(b"id,note\n" + b"\n".join(raw for _, raw, _, _ in shapes))
    source = FileSource(str(landing), "csv")
    batch = read_files(spark, source, spec.data_schema(spark), [str(landing / "a.csv")])

    result = commit_batch(
        TableWriter(spark, spec, "csv-shapes"), 0, batch, CommitOptions(raw_format="csv")
    )

    assert counts(result) == (3, 2, 1)
    landed = {r["id"]: r["note"] for r in spark.table(spec.name).collect()}
    assert landed == {"csv_a": shapes[0][3], "csv_b": shapes[1][3]}
    (reason,) = [r["_lh_reason"] for r in spark.table(spec.quarantine_name).collect()]
    assert reason.startswith(str(shapes[2][3]))


def test_a_line_past_the_limit_is_never_read_and_the_rest_of_its_file_lands(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    """A small limit stands in for a gigabyte line (the slow tier lands a real one)."""
    rules = RecordRules(max_record_bytes=4096)
    spec = make_table(schema="id STRING NOT NULL, note STRING", keys=("id",), records=rules)
    landing = tmp_path / "landing"
    landing.mkdir()
    long = b'{"id": "long", "note": "' + b"x" * 10_000 + b'"}'
    (landing / "a.json").write_bytes(b'{"id": "a1"}\r\n' + long + b'\r\n{"id": "a2"}')
    with gzip.open(landing / "b.json.gz", "wb") as zipped:
        zipped.write(b'{"id": "b1"}\n' + long + b"\n")
    (landing / "c.json").write_bytes(b'{"id": "c1"}\n')
    files = [str(p) for p in sorted(landing.iterdir())]

    batch = read_files(
        spark, FileSource(str(landing), "json"), spec.data_schema(spark), files, rules
    )
    result = commit_batch(
        TableWriter(spark, spec, "long-lines"), 0, batch, CommitOptions(raw_format="json")
    )

    assert counts(result) == (6, 4, 2)
    assert sorted(r["id"] for r in spark.table(spec.name).collect()) == ["a1", "a2", "b1", "c1"]
    rows = spark.table(spec.quarantine_name).orderBy("_lh_source").collect()
    assert [(r["_lh_source"].rsplit("/", 1)[1], r["_lh_raw"]) for r in rows] == [
        ("a.json", long[:1024].decode()),
        ("b.json.gz", long[:1024].decode()),
    ]
    assert all("10,026 bytes (line 2 of its file)" in r["_lh_reason"] for r in rows)
    sources = {r["_lh_source"] for r in rows}
    landed_sources = {
        r[0] for r in batch.where(F.col("id").isNotNull()).select("_lh_source_file").collect()
    }
    assert sources <= landed_sources, "a copy's rows name the file they came from"


@pytest.mark.parametrize(
    ("unit", "sent", "landed"),
    [
        ("seconds", "1790000000", "2026-09-21 14:13:20"),
        ("milliseconds", "1790000000123", "2026-09-21 14:13:20.123"),
        ("microseconds", "1790000000123456", "2026-09-21 14:13:20.123456"),
    ],
)
def test_epoch_numbers_land_in_the_declared_unit_and_others_are_quarantined(
    spark: SparkSession, make_table: MakeTable, unit: str, sent: str, landed: str
) -> None:
    rules = RecordRules(timestamp_unit=unit)  # type: ignore[arg-type]
    spec = make_table(
        schema="id STRING NOT NULL, ts TIMESTAMP, d DATE", keys=("id",), records=rules
    )
    values = [
        f'{{"id": "n", "ts": {sent}}}',
        '{"id": "s", "ts": "2026-01-02T03:04:05"}',
        '{"id": "f", "ts": 1.5}',
        '{"id": "big", "ts": 99999999999999999999}',
        '{"id": "d", "d": 19000}',
    ]
    frame = spark.createDataFrame(
        [(b"k", v.encode(), "topic", 0, n, None) for n, v in enumerate(values)],
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    source = KafkaSource(bootstrap_servers="localhost:9092", topic="topic")
    batch = kafka_rows(frame, source, spec.data_schema(spark), rules).drop(*KAFKA_COLUMNS)

    result = commit_batch(
        TableWriter(spark, spec, "epochs"), 0, batch, CommitOptions(raw_format="json")
    )

    assert counts(result) == (5, 2, 3)
    rows = spark.table(spec.name).select("id", F.col("ts").cast("string"), "_lh_rescued").collect()
    assert sorted(tuple(r) for r in rows) == [
        ("n", landed, None),
        ("s", "2026-01-02 03:04:05", None),
    ]
    reasons = {r["_lh_raw"]: r["_lh_reason"] for r in spark.table(spec.quarantine_name).collect()}
    assert reasons[values[2]].endswith(
        f"value '1.5' is not a whole number of {unit} within years 1 to 9999 (timestamp_unit)"
    )
    assert "is not a whole number" in reasons[values[3]]
    assert reasons[values[4]] == (
        "wrong type: column d value '19000' is a number, not a DATE (a DATE column takes dates "
        "as text)"
    )


def test_the_pure_scans_are_linear_and_stack_safe_without_spark() -> None:
    deep = '{"id": "a", "x": ' + "[" * 999 + "]" * 999 + "}"
    assert parse_failure(deep) is None
    assert rescued_json(deep, ["id"], ["id"]) == '{"fields":{"x":' + deep[17:-1] + "}}"
    assert parser_limit('{"x": ' + "[{" * 600 + "}]" * 600 + "}") is not None
    assert parse_failure('{"id": "a"') == "malformed JSON: not valid JSON (truncated or broken)"
    assert parse_failure("[1]") == (
        "malformed JSON: the record is an array or a bare value, not an object"
    )
    value = "\\" * (2 * MIB)
    members = top_level_members('{"id": "a", "n\\u0061me": "' + value + '"}')
    assert members == [("id", '"a"'), ("name", '"' + value + '"')]
    assert top_level_members('{"id": "a"} tail') is None
    assert top_level_members('{"id": "' + value) is None


def test_the_csv_field_count_of_a_corrupt_row_is_linear_on_a_1mib_field(
    spark: SparkSession,
) -> None:
    schema = parse_struct("id STRING, note STRING")
    rows = [('a,"' + '""' * (MIB // 2) + '",x',), ('b,"' + "q" * MIB,)]
    frame = spark.createDataFrame(rows, f"{CORRUPT_COLUMN} STRING")

    reasons = [r[0] for r in frame.select(unparsed_reason(schema, "csv")).collect()]

    assert reasons == [
        "malformed CSV: 3 fields, the table has 2",
        "malformed record: does not parse with the table schema",
    ]
