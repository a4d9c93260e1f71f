from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import SparkSession

from tables.catalog import create_table, ensure_table, table_detail
from tables.errors import ConfigError, SchemaMismatchError
from tables.spec import TableSpec, parse_interval, validate_txn_retention


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
    with pytest.raises(ConfigError, match="cannot parse schema") as info:
        TableSpec("t", "a STRNG,,", ("a",)).data_schema(spark)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="not in schema"):
        TableSpec("t", "a STRING", ("b",)).data_schema(spark)


def test_table_schema_puts_lineage_first(spark: SparkSession) -> None:
    schema = TableSpec("t", "a STRING, b INT", ("a",)).table_schema(spark)
    assert schema.fieldNames() == ["_lh_app_id", "_lh_batch_id", "_lh_ingested_at", "a", "b"]


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
        ({"dedup": "global"}, "dedup must be one of"),
        ({"dedup": "window"}, "needs dedup_column and dedup_window"),
        ({"dedup": "window", "dedup_column": "a", "dedup_window": timedelta(0)}, "positive"),
        ({"dedup": "table", "dedup_column": "a"}, "apply to dedup = 'window' only"),
    ],
)
def test_dedup_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TableSpec("t", "a TIMESTAMP, k STRING", ("k",), **kwargs)  # type: ignore[arg-type]


def test_window_needs_a_time_column(spark: SparkSession) -> None:
    spec = TableSpec(
        "t",
        "a INT, k STRING",
        ("k",),
        dedup="window",
        dedup_column="a",
        dedup_window=timedelta(days=1),
    )
    with pytest.raises(ConfigError, match="needs a timestamp or date column"):
        spec.data_schema(spark)
