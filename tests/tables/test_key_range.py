"""A table's key range known without a read: its predicates, Delta's statistics, its carry."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tables.delta import key_range
from tables.delta.key_range import (
    KeyRange,
    KeyRanges,
    are_keys_orderable,
    is_orderable,
    is_outside,
    widened,
)
from tables.engine.jvm import delta
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def test_types_python_orders_as_spark_does() -> None:
    assert all(is_orderable(t) for t in (StringType(), LongType(), DecimalType(10, 2), DateType()))
    assert not any(is_orderable(t) for t in (DoubleType(), TimestampType()))
    assert not is_orderable(StringType("UTF8_LCASE"))
    schema = StructType([StructField("k", StringType()), StructField("x", DoubleType())])
    assert are_keys_orderable(schema, ("k",))
    assert not are_keys_orderable(schema, ("k", "x"))
    assert not are_keys_orderable(schema, ("missing",))


def test_a_batch_is_outside_when_one_key_column_misses_the_range() -> None:
    table = KeyRange("id", 3, ("a", "b"), {"a": ("e10", "e19"), "b": (1, 5)})

    assert is_outside(table, {"a": ("e20", "e29"), "b": (1, 5)})
    assert is_outside(table, {"a": ("e10", "e19"), "b": (6, 9)})
    assert is_outside(table, {"a": ("e0", "e0"), "b": (1, 1)})
    assert not is_outside(table, {"a": ("e19", "e20"), "b": (5, 6)})
    assert not is_outside(None, {"a": ("e20", "e29"), "b": (1, 5)})
    assert is_outside(KeyRange("id", 3, ("a", "b"), None), {"a": ("e1", "e1"), "b": (1, 5)})
    all_null_a = KeyRange("id", 3, ("a", "b"), {"a": (None, None), "b": (1, 5)})
    assert is_outside(all_null_a, {"a": ("x", "y"), "b": (1, 1)})
    assert not is_outside(table, {"a": (None, None), "b": (1, 5)})


def test_a_range_of_other_key_columns_or_types_decides_nothing() -> None:
    """Another spec's keys, or values that no longer compare (a type changed): the audit reads."""
    table = KeyRange("id", 3, ("d",), {"d": (date(2026, 1, 1), date(2026, 1, 2))})

    assert not is_outside(table, {"e": (date(2027, 1, 1), date(2027, 1, 1))})
    assert not is_outside(table, {"d": (datetime(2027, 1, 1), datetime(2027, 1, 2))})
    assert widened(table, {"e": (date(2027, 1, 1), date(2027, 1, 1))}, 4) is None
    assert widened(table, {"d": (datetime(2027, 1, 1), datetime(2027, 1, 2))}, 4) is None
    ranges = KeyRanges()
    ranges.remember(table)
    assert ranges.known("id", 3, ("e",)) is None
    ranges.carry("id", 3, 4, {"e": (date(2027, 1, 1), date(2027, 1, 1))})
    assert ranges.known("id", 4, ("e",)) is None


def test_a_range_widens_by_the_batch_and_keeps_its_table() -> None:
    table = KeyRange("id", 3, ("k",), {"k": (Decimal("1.5"), Decimal("2.0"))})

    assert widened(table, {"k": (Decimal("0.5"), Decimal("1.0"))}, 4) == KeyRange(
        "id", 4, ("k",), {"k": (Decimal("0.5"), Decimal("2.0"))}
    )
    empty = KeyRange("id", 3, ("k",), None)
    assert widened(empty, {"k": (1, 2)}, 4) == KeyRange("id", 4, ("k",), {"k": (1, 2)})
    unchanged = widened(table, {"k": (None, None)}, 4)
    assert unchanged is not None
    assert unchanged.bounds == table.bounds


def test_a_commit_carries_the_range_only_to_the_very_next_version() -> None:
    ranges = KeyRanges()
    ranges.remember(KeyRange("t1", 3, ("k",), {"k": (1, 2)}))

    ranges.carry("t1", 3, 5, {"k": (7, 9)})
    assert ranges.known("t1", 5, ("k",)) is None

    ranges.carry("t1", 3, 4, {"k": (7, 9)})
    assert ranges.known("t1", 4, ("k",)) == KeyRange("t1", 4, ("k",), {"k": (1, 9)})
    assert ranges.known("t1", 3, ("k",)) is None
    assert ranges.known("t2", 4, ("k",)) is None
    assert ranges.known(None, 4, ("k",)) is None

    ranges.remember(KeyRange("t1", 2, ("k",), {"k": (0, 0)}))
    assert ranges.known("t1", 4, ("k",)) is not None


def _snapshot_range(spark: SparkSession, table: str) -> KeyRange | None:
    return delta.read_snapshot(
        spark, table, lambda s: key_range.stats_range(delta.snapshot_files(spark, s), ("k", "n"))
    )


def test_the_range_comes_from_deltas_file_statistics(spark: SparkSession) -> None:
    spark.sql("CREATE TABLE kr_stats (k STRING, n BIGINT, d DATE) USING delta")
    empty = _snapshot_range(spark, "kr_stats")
    spark.sql("INSERT INTO kr_stats VALUES ('e07', 3, DATE'2026-01-02'), ('e02', 9, NULL)")
    spark.sql("INSERT INTO kr_stats VALUES ('e05', -4, DATE'2026-01-01')")
    spark.sql("INSERT INTO kr_stats VALUES (NULL, NULL, NULL)")

    found = _snapshot_range(spark, "kr_stats")

    assert empty is not None
    assert empty.bounds is None
    assert found is not None
    assert found.version == 3
    assert found.bounds == {"k": ("e02", "e07"), "n": (-4, 9)}
    dates = delta.read_snapshot(
        spark, "kr_stats", lambda s: key_range.stats_range(delta.snapshot_files(spark, s), ("d",))
    )
    assert dates is not None
    assert dates.bounds == {"d": (date(2026, 1, 1), date(2026, 1, 2))}


@pytest.mark.parametrize(
    ("name", "ddl", "properties", "insert"),
    [
        # the key column is not among the indexed ones: its files carry no statistics for it
        ("kr_nostats", "n BIGINT, k STRING", "'delta.dataSkippingNumIndexedCols'='1'", "(1, 'a')"),
        # the table holds the key as a timestamp (another writer may have widened a date)
        ("kr_widened", "k TIMESTAMP, n BIGINT", None, "(TIMESTAMP'2026-01-01 00:00:00', 1)"),
        # the table maps column names: its statistics use physical names
        ("kr_mapped", "k STRING, n BIGINT", "'delta.columnMapping.mode' = 'name'", "('a', 1)"),
    ],
)
def test_a_range_the_statistics_cannot_vouch_for_is_left_to_delta(
    spark: SparkSession, name: str, ddl: str, properties: str | None, insert: str
) -> None:
    extra = f" TBLPROPERTIES ({properties})" if properties else ""
    spark.sql(f"CREATE TABLE {name} ({ddl}) USING delta{extra}")
    spark.sql(f"INSERT INTO {name} VALUES {insert}")

    found = delta.read_snapshot(
        spark, name, lambda s: key_range.stats_range(delta.snapshot_files(spark, s), ("k",))
    )

    assert found is None
