"""Values changed to fit a non-STRING column: a rounded DECIMAL is rescued, an overflow quarantined.

Spark's `from_json` and `try_cast` round `17.505` into DECIMAL(10, 2) as 17.51 without a word,
and make an integer too large for INT or BIGINT a parse failure. The first lands with its
original in `_lh_rescued.converted`, like a number sent to a STRING column; the second is
quarantined with a reason, never landed as NULL.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.sources.files import FileSource, read_files
from quality.csv_records import file_records
from quality.rescue import rescued_json
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
SCHEMA = "id STRING NOT NULL, price DECIMAL(10, 2), qty INT, big BIGINT"


def land(
    spark: SparkSession, spec: TableSpec, tmp_path: Path, name: str, data: bytes
) -> BatchResult:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / name).write_bytes(data)
    fmt = name.rsplit(".", 1)[1]
    source = FileSource(str(landing), fmt)  # type: ignore[arg-type]
    batch = read_files(spark, source, spec.data_schema(spark), [str(landing / name)])
    return commit_batch(
        TableWriter(spark, spec, "conversions"), 0, batch, CommitOptions(raw_format=fmt)
    )


def landed(spark: SparkSession, spec: TableSpec) -> dict[str, tuple[object, object]]:
    rows = spark.table(spec.name).select("id", "price", "_lh_rescued").collect()
    return {r["id"]: (r["price"], r["_lh_rescued"]) for r in rows}


def reasons(spark: SparkSession, spec: TableSpec) -> dict[str, str]:
    rows = spark.table(spec.quarantine_name).collect()
    return {r["_lh_raw"]: r["_lh_reason"] for r in rows}


def test_a_rounded_decimal_lands_with_its_original_and_an_overflow_is_quarantined(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    lines = [
        '{"id": "a", "price": 17.505}',
        '{"id": "b", "price": "1.239"}',
        '{"id": "c", "price": 17.50}',
        '{"id": "d", "price": 1.005e1}',
        '{"id": "e", "price": 17.5, "qty": 2147483648}',
        '{"id": "f", "big": 9223372036854775808}',
        '{"id": "g", "price": 123456789012.5}',
    ]

    result = land(spark, spec, tmp_path, "a.json", "\n".join(lines).encode())

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (7, 4, 3)
    assert landed(spark, spec) == {
        "a": (Decimal("17.51"), '{"converted":{"price":17.505}}'),
        "b": (Decimal("1.24"), '{"converted":{"price":"1.239"}}'),
        "c": (Decimal("17.50"), None),
        "d": (Decimal("10.05"), None),
    }
    found = reasons(spark, spec)
    assert found[lines[4]] == "wrong type: column qty value '2147483648' is not a INT"
    assert found[lines[5]] == "wrong type: column big value '9223372036854775808' is not a BIGINT"
    # The reason quotes the value as Spark's get_json_object renders it; _lh_raw is exact.
    assert found[lines[6]].startswith("wrong type: column price value '1.234567890125E11'")
    assert found[lines[6]].endswith("is not a DECIMAL(10,2)")


def test_a_rounded_decimal_is_quarantined_under_unknown_fields_quarantine(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), unknown_fields="quarantine")

    result = land(spark, spec, tmp_path, "a.json", b'{"id": "a", "price": 17.505}\n')

    assert (result.rows_inserted, result.rows_quarantined) == (0, 1)
    assert reasons(spark, spec) == {
        '{"id": "a", "price": 17.505}': "unknown fields: price (converted to fit the column) "
        "(the table's unknown_fields is quarantine)"
    }


def test_a_rounded_csv_decimal_lands_with_its_original_text(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))

    result = land(spark, spec, tmp_path, "a.csv", b"id,price\na,17.505\nb,2.5\n")

    assert (result.rows_inserted, result.rows_quarantined) == (2, 0)
    assert landed(spark, spec) == {
        "a": (Decimal("17.51"), '{"converted":{"price":"17.505"}}'),
        "b": (Decimal("2.50"), None),
    }


def test_rounding_is_found_exactly_without_spark() -> None:
    columns, scales = ["id", "price"], {"price": 2}

    assert rescued_json('{"id":"a","price":1e-3}', columns, ["id"], scales) == (
        '{"converted":{"price":1e-3}}'
    )
    assert rescued_json('{"id":"a","price":2.500}', columns, ["id"], scales) is None
    assert rescued_json('{"id":"a","price":12}', columns, ["id"], scales) is None
    [record] = file_records(b"id,price\na,0.125\n", columns, {}, scales)
    assert record["rescued"] == '{"converted":{"price":"0.125"}}'
