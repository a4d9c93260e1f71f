"""CSV files split exactly: a header that is not UTF-8, and reader options with case ignored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.sources.files import FileSource, read_files
from quality.csv_records import HEADER_NOT_UTF8, file_records
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
SCHEMA = "id STRING NOT NULL, name STRING"


def test_a_header_that_is_not_utf8_quarantines_every_record_of_its_file_without_spark() -> None:
    data = b"id,na\xefme\nb,\xe9t\xe9\nc,plain\n"

    records = file_records(data, ["id", "name"], {})

    assert [(r["raw"], r["values"], r["fault"]) for r in records] == [
        (b"id,na\xefme", None, HEADER_NOT_UTF8),
        (b"b,\xe9t\xe9", None, HEADER_NOT_UTF8),
        (b"c,plain", None, HEADER_NOT_UTF8),
    ]


def test_a_header_that_is_not_utf8_lands_nothing_and_keeps_every_record_exactly(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.csv").write_bytes(b"id,na\xefme\na,x\nb,y\n")
    (landing / "b.csv").write_bytes(b"id,name\nc,z\n")
    files = [str(landing / "a.csv"), str(landing / "b.csv")]
    batch = read_files(spark, FileSource(str(landing), "csv"), spec.data_schema(spark), files)

    result = commit_batch(
        TableWriter(spark, spec, "csv"), 0, batch, CommitOptions(raw_format="csv")
    )

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (4, 1, 3)
    assert [r["id"] for r in spark.table(spec.name).collect()] == ["c"]
    quarantined = spark.table(spec.quarantine_name).collect()
    assert sorted(
        (r["_lh_reason"], r["_lh_raw"] or "", bytes(r["_lh_raw_bytes"] or b"")) for r in quarantined
    ) == [
        (HEADER_NOT_UTF8, "", b"id,na\xefme"),
        (HEADER_NOT_UTF8, "a,x", b""),
        (HEADER_NOT_UTF8, "b,y", b""),
    ]


def test_reader_options_are_matched_with_case_ignored_as_spark_does() -> None:
    data = b"a;1\nb;2\n"

    records = file_records(data, ["id", "name"], {"Header": "false", "SEP": ";"})

    assert [r["values"] for r in records] == [["a", "1"], ["b", "2"]]


def test_an_empty_quote_or_escape_turns_it_off_as_spark_does_without_spark() -> None:
    data = b'id,name\na,"x\nb,\\"y"\n'

    unquoted = file_records(data, ["id", "name"], {"quote": ""})
    unescaped = file_records(b'id,name\na,"x\\",y\n', ["id", "name"], {"escape": ""})

    # No quoting: a quote is an ordinary character and a line break always ends a record.
    assert [r["values"] for r in unquoted] == [["a", '"x'], ["b", '\\"y"']]
    # No escaping: the backslash is kept and the quote after it closes the field.
    assert [(r["raw"], r["fault"]) for r in unescaped] == [
        (b'a,"x\\",y', "malformed CSV: 3 fields, the header has 2")
    ]


def test_a_csv_source_with_an_empty_quote_lands_quotes_as_text(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.csv").write_bytes(b'id,name\na,"x\nb,"y,z"\n')
    source = FileSource(str(landing), "csv", {"Quote": ""})
    batch = read_files(spark, source, spec.data_schema(spark), [str(landing / "a.csv")])

    result = commit_batch(
        TableWriter(spark, spec, "csv"), 0, batch, CommitOptions(raw_format="csv")
    )

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (2, 1, 1)
    assert [(r["id"], r["name"]) for r in spark.table(spec.name).collect()] == [("a", '"x')]
    [rejected] = spark.table(spec.quarantine_name).collect()
    assert (rejected["_lh_reason"], rejected["_lh_raw"]) == (
        "malformed CSV: 3 fields, the header has 2",
        'b,"y,z"',
    )
