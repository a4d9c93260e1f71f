"""Nothing silently changed: rescued fields, blank keys, CSV header names, exact raw records.

Each test reads real files with the reader the stream uses (`ingest.sources.files.read_files`) and
commits them with `commit_batch`, against real Spark and Delta tables.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.sources.files import FileSource, read_files
from quality.csv_records import file_records, split_fields, split_records
from quality.rescue import rescued_json
from tables.delta.history import table_version
from tables.delta.provision import ensure_table
from tables.delta.table import add_missing_columns, create_table
from tables.delta.writer import TableWriter
from tables.errors import UnknownFieldsError
from tables.spec import LINEAGE_DDL, TableSpec, parse_struct

MakeTable = Callable[..., TableSpec]
SCHEMA = "id STRING NOT NULL, qty INT, name STRING"


def land(
    spark: SparkSession,
    spec: TableSpec,
    tmp_path: Path,
    name: str,
    data: bytes,
    fmt: str = "json",
) -> BatchResult:
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    path = landing / name
    path.write_bytes(data)
    source = FileSource(str(landing), fmt)  # type: ignore[arg-type]
    batch = read_files(spark, source, spec.data_schema(spark), [str(path)])
    return commit_batch(
        TableWriter(spark, spec, "records"), 0, batch, CommitOptions(raw_format=fmt)
    )


def table_rows(spark: SparkSession, spec: TableSpec) -> dict[str, tuple[object, ...]]:
    rows = spark.table(spec.name).select("id", "qty", "name", "_lh_rescued").collect()
    return {r["id"]: (r["qty"], r["name"], r["_lh_rescued"]) for r in rows}


def quarantine_rows(spark: SparkSession, spec: TableSpec) -> list[tuple[object, ...]]:
    rows = spark.table(spec.quarantine_name).collect()
    return sorted(
        (r["_lh_reason"], r["_lh_raw"], r["_lh_raw_bytes"], r["_lh_source"]) for r in rows
    )


def test_fields_the_schema_cannot_hold_land_with_their_exact_rescued_content(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    lines = [
        '{"id": "a", "qty": 1, "extra": {"x": [1, 2.50]}}',
        '{"id": "b", "QTY": 17}',
        '{"id": "c", "qty": 1, "qty": 2}',
        '{"id": "d", "name": {"k": "v"}}',
        '{"id": "e", "name": 17.50}',
        '{"id": "f", "name": false}',
        '{"id": "g", "qty": 3, "name": "plain"}',
    ]

    result = land(spark, spec, tmp_path, "a.json", "\n".join(lines).encode())

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (7, 7, 0)
    assert table_rows(spark, spec) == {
        "a": (1, None, '{"fields":{"extra":{"x":[1,2.50]}}}'),
        "b": (None, None, '{"fields":{"QTY":17}}'),
        "c": (2, None, '{"duplicates":{"qty":[1]}}'),
        "d": (None, '{"k":"v"}', '{"converted":{"name":{"k":"v"}}}'),
        "e": (None, "17.5", '{"converted":{"name":17.50}}'),
        "f": (None, "false", '{"converted":{"name":false}}'),
        "g": (3, "plain", None),
    }


def test_record_keys_blank_in_unicode_are_quarantined(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    blanks = ["\\t", "\\n", "\u00a0", "\\u200b", "\u3000", "\\ufeff"]
    lines = [f'{{"id": "{b}", "qty": {n}}}' for n, b in enumerate(blanks)] + ['{"id": "ok"}']

    result = land(spark, spec, tmp_path, "a.json", "\n".join(lines).encode())

    assert (result.rows_inserted, result.rows_quarantined) == (1, len(blanks))
    found = quarantine_rows(spark, spec)
    assert sorted(raw for _, raw, _, _ in found) == sorted(lines[:-1])
    assert all(str(reason).startswith("blank record key: id is empty") for reason, *_ in found)


def test_unknown_fields_quarantine_names_the_fields(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), unknown_fields="quarantine")
    lines = ['{"id": "a", "QTY": 1, "extra": 2}', '{"id": "b", "qty": 1}']

    result = land(spark, spec, tmp_path, "a.json", "\n".join(lines).encode())

    assert (result.rows_inserted, result.rows_quarantined) == (1, 1)
    [(reason, raw, _, _)] = quarantine_rows(spark, spec)
    assert reason == (
        "unknown fields: QTY, extra (not in the schema) (the table's unknown_fields is quarantine)"
    )
    assert raw == lines[0]


def test_unknown_fields_fail_stops_the_batch_naming_file_key_and_field(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), unknown_fields="fail")
    version = table_version(spark, spec.name)

    with pytest.raises(UnknownFieldsError) as caught:
        land(spark, spec, tmp_path, "a.json", b'{"id": "a"}\n{"id": "b", "surplus": 1}\n')

    error = caught.value
    assert (error.key, error.fields) == ("id=b", ("surplus (not in the schema)",))
    assert error.file is not None
    assert error.file.endswith("a.json")
    assert "\n" not in str(error)
    assert "a.json" in str(error)
    assert table_version(spark, spec.name) == version


def test_trailing_text_and_invalid_utf8_are_quarantined_exactly(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    trailing = b'{"id": "t", "qty": 1} and more'
    latin1 = b'{"id": "caf\xe9", "qty": 2}'
    data = b"\n".join([trailing, latin1, b'{"id": "ok"}']) + b"\n"

    result = land(spark, spec, tmp_path, "a.json", data)

    assert (result.rows_inserted, result.rows_quarantined) == (1, 2)
    [invalid, trail] = quarantine_rows(spark, spec)
    assert invalid[0].startswith("invalid UTF-8")
    assert (invalid[1], bytes(invalid[2])) == (None, latin1)
    assert trail[:3] == (
        "malformed JSON: trailing text after the JSON object",
        trailing.decode(),
        None,
    )


def test_a_gzip_file_named_json_is_one_file_level_row_and_json_gz_is_decoded(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    lines = b"".join(b'{"id": "z%d", "qty": %d}\n' % (n, n) for n in range(200))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "good.json.gz").write_bytes(gzip.compress(lines))
    (landing / "disguised.json").write_bytes(gzip.compress(lines.replace(b"z", b"y")))
    source = FileSource(str(landing), "json")
    files = [str(landing / "good.json.gz"), str(landing / "disguised.json")]

    batch = read_files(spark, source, spec.data_schema(spark), files)
    result = commit_batch(
        TableWriter(spark, spec, "records"), 0, batch, CommitOptions(raw_format="json")
    )

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (201, 200, 1)
    [(reason, raw, raw_bytes, where)] = quarantine_rows(spark, spec)
    assert str(reason).startswith("undecodable file: gzip-compressed data")
    assert (raw, raw_bytes) == (None, None)
    assert str(where).endswith("disguised.json")


def test_a_line_starting_with_a_magic_number_inside_a_json_file_is_only_a_malformed_line(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    landing = tmp_path / "landing"
    landing.mkdir()
    valid = [b'{"id": "v%d", "qty": %d}' % (n, n) for n in range(6)]
    junk = b"BZh91AY&SY junk that only looks like bzip2"
    (landing / "mixed lines.json").write_bytes(b"\n".join([*valid[:3], junk, *valid[3:]]) + b"\n")
    (landing / "gzip named [plain].json").write_bytes(gzip.compress(b'{"id": "g"}\n'))
    files = [str(landing / "mixed lines.json"), str(landing / "gzip named [plain].json")]
    source = FileSource(str(landing), "json")

    def commit() -> BatchResult:
        batch = read_files(spark, source, spec.data_schema(spark), files)
        return commit_batch(
            TableWriter(spark, spec, "records"), 0, batch, CommitOptions(raw_format="json")
        )

    result = commit()

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (8, 6, 2)
    assert sorted(table_rows(spark, spec)) == [f"v{n}" for n in range(6)]
    [bzip_junk, gzip_file] = quarantine_rows(spark, spec)
    assert bzip_junk[:3] == (
        "malformed JSON: not valid JSON (truncated or broken)",
        junk.decode(),
        None,
    )
    assert str(gzip_file[0]).startswith("undecodable file: gzip-compressed data")
    # `_lh_source` is `_metadata.file_path`, URL-encoded; the file is read by its decoded name.
    assert str(gzip_file[3]).endswith("gzip%20named%20%5Bplain%5D.json")
    again = commit()
    assert (again.status, again.rows_read) == ("skipped", 8)


def test_csv_columns_match_the_header_by_name_and_quoted_newlines_stay_one_record(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    data = b'name,id,qty,extra\n"two\nlines",a,1,x\nplain,b,2,\n'

    result = land(spark, spec, tmp_path, "a.csv", data, fmt="csv")

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (2, 2, 0)
    assert table_rows(spark, spec) == {
        "a": (1, "two\nlines", '{"fields":{"extra":"x"}}'),
        "b": (2, "plain", '{"fields":{"extra":null}}'),
    }


def test_an_existing_table_gains_the_rescued_column_by_one_metadata_commit(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = TableSpec(name="t_before_rescue", schema_ddl=SCHEMA, keys=("id",))
    old = parse_struct(f"{LINEAGE_DDL}, {SCHEMA}")
    create_table(spark, spec.name, old, partition_by=spec.table_partitions)
    spark.sql(f"INSERT INTO {spec.name} VALUES ('old', 0, current_timestamp(), 'x', 1, 'kept')")
    before = table_version(spark, spec.name)
    racers = [
        threading.Thread(
            target=add_missing_columns,
            args=(spark, spec.name, spec.table_schema(spark), ("_lh_rescued",)),
        )
        for _ in range(2)
    ]

    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    ensure_table(spark, spec)

    assert spark.table(spec.name).columns[-1] == "_lh_rescued"
    history = spark.sql(f"DESCRIBE HISTORY {spec.name}").where(f"version > {before}").collect()
    assert [r["operation"] for r in history] == ["ADD COLUMNS"]
    assert spark.table(spec.name).where("_lh_rescued IS NULL").count() == 1
    land(spark, spec, tmp_path, "a.json", b'{"id": "n", "more": 1}\n')
    assert table_rows(spark, spec)["n"] == (None, None, '{"fields":{"more":1}}')


def test_rescue_keeps_number_digits_repeated_keys_and_order_without_spark() -> None:
    line = (
        '{"id":"a","Id":1e5,"id":"b","name":[1,{"k":1,"k":2}],"big":123456789012345678901234567890}'
    )

    assert rescued_json(line, ["id", "name"], ["id", "name"]) == (
        '{"fields":{"Id":1e5,"big":123456789012345678901234567890},'
        '"converted":{"name":[1,{"k":1,"k":2}]},"duplicates":{"id":["a"]}}'
    )
    assert rescued_json('{"id": "a"}', ["id"], ["id"]) is None
    assert rescued_json('{"id": "a"} x', ["id"], ["id"]) is None


def test_csv_split_keeps_quoted_newlines_and_exact_bytes_without_spark() -> None:
    data = b'id,name\r\n"a\r\nb","x,""y"""\r\n\xff,z\n'

    assert list(split_records(data)) == [b"id,name", b'"a\r\nb","x,""y"""', b"\xff,z"]
    assert split_fields('a,,"",\\x') == ["a", None, "", "\\x"]
    records = file_records(data, ["id", "name"], {})
    assert [r["fault"] for r in records] == [None, records[1]["fault"]]
    assert records[0]["values"] == ["a\r\nb", 'x,"y"']
    assert records[1]["raw"] == b"\xff,z"
    assert records[1]["fault"].startswith("invalid UTF-8")


def test_kafka_json_values_get_the_same_fates_as_file_lines(
    spark: SparkSession, make_table: MakeTable
) -> None:
    from ingest.sources.kafka import KafkaSource
    from ingest.sources.kafka_read import KAFKA_COLUMNS, kafka_rows

    spec = make_table(schema=SCHEMA, keys=("id",))
    values = [b'{"id": "a", "QTY": 1}', b'{"id": "b"} tail', b'{"id": "\xe9"}', b'{"id": "c"}']
    frame = spark.createDataFrame(
        [(b"k", v, "topic", 0, n, None) for n, v in enumerate(values)],
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP",
    )
    source = KafkaSource(bootstrap_servers="localhost:9092", topic="topic")

    batch = kafka_rows(frame, source, spec.data_schema(spark)).drop(*KAFKA_COLUMNS)
    result = commit_batch(
        TableWriter(spark, spec, "kafka"), 0, batch, CommitOptions(raw_format="json")
    )

    assert (result.rows_inserted, result.rows_quarantined) == (2, 2)
    assert table_rows(spark, spec) == {
        "a": (None, None, '{"fields":{"QTY":1}}'),
        "c": (None, None, None),
    }
    reasons = sorted(str(r[0]).split(":")[0] for r in quarantine_rows(spark, spec))
    assert reasons == ["invalid UTF-8", "malformed JSON"]
