"""Business-key dedup across batches at merge time: `batch`, `table` and `window` scopes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from quality.audit import audit_commit
from tables.delta.history import find_ledger_entry
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
SCHEMA = "event_id STRING NOT NULL, amount DOUBLE, event_time TIMESTAMP"
START = datetime(2026, 11, 1)


def events(spark: SparkSession, ids: list[int], day: int = 0) -> DataFrame:
    """Events whose time is their id in minutes after START (+ `day` days for a late batch)."""
    return spark.createDataFrame(
        [(f"e{i}", float(i), START + timedelta(days=day, minutes=i)) for i in ids],
        "event_id string, amount double, event_time timestamp",
    )


def scoped(make_table: MakeTable, scope: str) -> TableSpec:
    window = {"dedup_column": "event_time", "dedup_window": timedelta(days=7)}
    return make_table(schema=SCHEMA, dedup=scope, **(window if scope == "window" else {}))


def copies(spark: SparkSession, spec: TableSpec) -> dict[str, int]:
    rows = spark.table(spec.name).groupBy("event_id").count().collect()
    return {r["event_id"]: r["count"] for r in rows}


@pytest.mark.parametrize(
    ("scope", "resent_copies", "inserted", "present"),
    [("batch", 2, 2, 0), ("table", 1, 1, 1), ("window", 1, 1, 1)],
)
def test_a_resend_in_a_later_batch(
    spark: SparkSession,
    make_table: MakeTable,
    scope: str,
    resent_copies: int,
    inserted: int,
    present: int,
) -> None:
    spec = scoped(make_table, scope)
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [1, 2, 3]))

    second = commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, [3, 4]))

    assert copies(spark, spec) == {"e1": 1, "e2": 1, "e3": resent_copies, "e4": 1}
    assert (second.rows_inserted, second.rows_already_present) == (inserted, present)
    entry = find_ledger_entry(spark, spec.name, "app", 1)
    assert entry is not None
    assert entry.rows_already_present == present
    audit = audit_commit(TableWriter(spark, spec, "app"), 1, second.version)
    assert (audit.status, audit.sample_keys) == (
        ("failed", ("e3",)) if resent_copies == 2 else ("passed", ())
    )


def test_table_scope_matches_other_app_ids(spark: SparkSession, make_table: MakeTable) -> None:
    spec = scoped(make_table, "table")
    commit_batch(TableWriter(spark, spec, "old-app"), 0, events(spark, [1, 2]))

    commit_batch(TableWriter(spark, spec, "new-app"), 0, events(spark, [1, 2, 3]))

    assert copies(spark, spec) == {"e1": 1, "e2": 1, "e3": 1}


def test_a_resend_older_than_the_window_is_not_matched(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = scoped(make_table, "window")
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [1, 2]))
    late = events(spark, [1]).unionByName(events(spark, [50], day=30))

    result = commit_batch(TableWriter(spark, spec, "app"), 1, late)

    assert result.rows_inserted == 2
    assert copies(spark, spec)["e1"] == 2
    # The MERGE let the old resend through; the post-commit audit, not bounded by the window,
    # flags it.
    audit = audit_commit(TableWriter(spark, spec, "app"), 1, result.version)
    assert (audit.status, audit.sample_keys) == ("failed", ("e1",))
