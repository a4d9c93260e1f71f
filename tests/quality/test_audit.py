"""The post-commit duplicate audit and the quality results table."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from quality.audit import audit_commit, audit_table, is_recorded, recent_results, record
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def events(spark: SparkSession, ids: list[str]) -> DataFrame:
    return spark.createDataFrame(
        [(i, "u", 1.0) for i in ids], "event_id string, user_id string, amount double"
    )


def test_a_clean_commit_passes(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    result = commit_batch(spark, spec, "app", 0, events(spark, ["a", "b", "a"]))

    audit = audit_commit(spark, spec, "app", 0, result.version)

    assert (audit.status, audit.checked_keys, audit.failing_keys) == ("passed", 2, 0)


def test_a_key_landed_by_two_batches_fails_and_is_recorded_once(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    commit_batch(spark, spec, "app", 0, events(spark, ["a", "b"]))
    result = commit_batch(spark, spec, "app", 1, events(spark, ["b", "c"]))

    audit = audit_commit(spark, spec, "app", 1, result.version)
    record(spark, [audit], txn=(f"audit.{spec.name}.app", 1))
    record(spark, [audit], txn=(f"audit.{spec.name}.app", 1))

    assert (audit.status, audit.checked_keys, audit.failing_keys, audit.sample_keys) == (
        "failed",
        2,
        1,
        ("b",),
    )
    assert is_recorded(spark, spec.name, "app", 1)
    assert not is_recorded(spark, spec.name, "app", 0)
    [row] = recent_results(spark, spec.name, 10)
    assert (row["status"], row["failing_keys"], row["table_version"]) == (
        "failed",
        1,
        result.version,
    )
    by_sql = spark.sql(
        f"SELECT count(*) AS n FROM lakehouse_quality WHERE table_name = '{spec.name}'"
    ).collect()
    assert by_sql[0]["n"] == 1


def test_full_table_audit(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(spark, spec, "x", 0, events(spark, ["a", "b"]))
    commit_batch(spark, spec, "y", 0, events(spark, ["a", "c", "d"]))

    audit = audit_table(spark, spec)

    assert (audit.status, audit.checked_keys, audit.failing_keys) == ("failed", 4, 1)
