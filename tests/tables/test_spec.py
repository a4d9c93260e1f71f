from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import SparkSession

from tables.delta.provision import ensure_table
from tables.delta.table import create_table, table_detail
from tables.errors import ConfigError, SchemaMismatchError
from tables.spec import ExpectationSpec, TableSpec
from tables.spec_rules import parse_interval, validate_txn_retention


def test_parse_interval() -> None:
    assert parse_interval("interval 7 days") == timedelta(days=7)
    assert parse_interval("36 hours") == timedelta(hours=36)
    with pytest.raises(ConfigError):
        parse_interval("a week or so")


def test_txn_retention_shorter_than_replay_window_is_refused() -> None:
    props = {"delta.setTransactionRetentionDuration": "interval 1 days"}
    with pytest.raises(ConfigError, match="replay window"):
        validate_txn_retention(props, timedelta(days=7))
    validate_txn_retention(
        {"delta.setTransactionRetentionDuration": "interval 8 days"}, timedelta(days=7)
    )
    with pytest.raises(ConfigError):
        TableSpec("t", "a STRING", ("a",), properties=props)


def test_log_retention_shorter_than_replay_window_is_refused() -> None:
    short = {"delta.logRetentionDuration": "interval 3 days"}
    with pytest.raises(ConfigError, match=r"replay window .*ledger entries"):
        validate_txn_retention(short, timedelta(days=7))
    validate_txn_retention({"delta.logRetentionDuration": "30 days"}, timedelta(days=7))
    with pytest.raises(ConfigError, match="logRetentionDuration"):
        TableSpec("t", "a STRING", ("a",), properties=short)
    TableSpec("t", "a STRING", ("a",), properties=short, replay_window=timedelta(days=2))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": ()}, "record key"),
        ({"keys": ("a", "a")}, "repeat"),
        ({"keys": ("_lh_x",)}, "reserved"),
        ({"name": "bad name"}, "invalid table name"),
    ],
)
def test_spec_validation(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"name": "t", "schema_ddl": "a STRING", "keys": ("a",), **kwargs}
    with pytest.raises(ConfigError, match=message):
        TableSpec(**args)  # type: ignore[arg-type]


def test_schema_parse_errors_are_one_line(spark: SparkSession) -> None:
    spec = TableSpec("t", "a STRING, b DECIMAL(40, 2)", ("a",))
    with pytest.raises(
        ConfigError, match=r"^table t: schema: cannot parse 'a STRING, b DECIMAL\(40, 2\)': .*40"
    ) as info:
        spec.data_schema(spark)
    assert "\n" not in str(info.value)
    assert info.value.key == ("schema",)


@pytest.mark.parametrize(
    ("ddl", "keys", "message"),
    [
        ("a STRNG,,", ("a",), "schema: cannot read the column list: column 2 is empty"),
        ("a STRING, b DUBBLE", ("a",), "schema: unknown type 'DUBBLE' for column b"),
        ("a STRING, b ARRAY<STRNG>", ("a",), "schema: unknown type 'STRNG' for column b"),
        ("a STRUCT<x: INT, y: TEXT>", ("a",), "schema: unknown type 'TEXT' for column a"),
        ("a VARCHAR", ("a",), "schema: type VARCHAR needs a length"),
        ("a STRING, b INT(3)", ("a",), "schema: type INT takes no parameters for column b"),
        ("a STRING", ("b",), "keys: column 'b' is not in the schema; the schema has: 'a'"),
        ("event_id STRING", ("EVENT_ID",), "did you mean 'event_id'?"),
        ("a STRING, A INT", ("a",), "schema: column declared twice: 'a', 'A'"),
        ("a STRING, _lh_x INT", ("a",), "schema: '_lh_x' uses the reserved prefix _lh_"),
        ("a STRING, `b c` INT", ("a",), "schema: invalid column name 'b c'"),
        ("int", ("int",), "schema: cannot read the column list: column 1 ('int') has no type"),
        ("a MAP<STRING, INT>", ("a",), "keys: a is a map or variant"),
    ],
)
def test_schema_names_are_checked_without_spark(
    ddl: str, keys: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=r"^table t: ") as info:
        TableSpec("t", ddl, keys)
    assert message in str(info.value)


def test_partition_and_expectation_columns_must_be_in_the_schema() -> None:
    with pytest.raises(ConfigError, match="partition_by: cannot partition by b, a nested"):
        TableSpec("t", "a STRING, b ARRAY<INT>", ("a",), partition_by=("b",))
    with pytest.raises(ConfigError, match=r"expectations\[0\]\.column: column 'c' is not in"):
        TableSpec("t", "a STRING", ("a",), expectations=(ExpectationSpec("t", "not_null", "c"),))
    TableSpec("t", "a STRING", ("a",), expectations=(ExpectationSpec("t", "column_exists", "c"),))


def test_table_schema_puts_lineage_first(spark: SparkSession) -> None:
    schema = TableSpec("t", "a STRING, b INT", ("a",)).table_schema(spark)
    assert schema.fieldNames() == [
        "_lh_app_id",
        "_lh_batch_id",
        "_lh_ingested_at",
        "a",
        "b",
        "_lh_rescued",
    ]


def test_ensure_table_is_idempotent_and_registers(spark: SparkSession) -> None:
    spec = TableSpec("spec_created", "a STRING NOT NULL, b INT", ("a",), partition_by=("b",))
    assert ensure_table(spark, spec) is True
    assert ensure_table(spark, spec) is False
    detail = table_detail(spark, "spec_created")
    assert detail.partition_columns == ("_lh_app_id", "b")
    assert detail.properties["delta.enableChangeDataFeed"] == "true"
    assert "delta.setTransactionRetentionDuration" not in detail.properties


def test_existing_table_with_other_schema_is_refused(spark: SparkSession) -> None:
    ensure_table(spark, TableSpec("spec_drift", "a STRING", ("a",)))
    with pytest.raises(SchemaMismatchError, match="missing column b"):
        ensure_table(spark, TableSpec("spec_drift", "a STRING, b INT", ("a",)))
    with pytest.raises(SchemaMismatchError, match="spec says int"):
        create_table(spark, "spec_drift", TableSpec("x", "a INT", ("a",)).data_schema(spark))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dedup": "global"}, "dedup: must be one of"),
        ({"dedup": "window"}, "needs dedup_column and dedup_window"),
        ({"dedup": "window", "dedup_column": "a", "dedup_window": timedelta(0)}, "positive"),
        ({"dedup": "table", "dedup_column": "a"}, "dedup_column: applies to dedup = 'window' only"),
    ],
)
def test_dedup_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TableSpec("t", "a TIMESTAMP, k STRING", ("k",), **kwargs)  # type: ignore[arg-type]


def test_window_needs_a_time_column() -> None:
    with pytest.raises(ConfigError, match="dedup_column: a is INT; a window needs a timestamp"):
        TableSpec(
            "t",
            "a INT, k STRING",
            ("k",),
            dedup="window",
            dedup_column="a",
            dedup_window=timedelta(days=1),
        )


@pytest.mark.parametrize("text", ["0 days", "interval 0 seconds", "0 weeks"])
def test_zero_intervals_are_refused_where_a_window_must_be_positive(text: str) -> None:
    assert parse_interval(text) == timedelta(0)
    with pytest.raises(ConfigError, match="must be longer than zero"):
        parse_interval(text, positive=True)


@pytest.mark.parametrize("text", ["-1 days", "7 days; DROP", "999999999999999 days", ""])
def test_intervals_match_whole_text(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_interval(text)
    assert "\n" not in str(info.value)


def test_interval_too_long_for_python_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="too long"):
        parse_interval("99999999999 weeks")


def test_zero_replay_window_is_refused() -> None:
    with pytest.raises(ConfigError, match="replay_window: must be longer than zero"):
        TableSpec("t", "a STRING", ("a",), replay_window=timedelta(0))
