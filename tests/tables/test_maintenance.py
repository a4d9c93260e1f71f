"""VACUUM's safety checks and OPTIMIZE, on real Delta tables."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from tables.delta.history import read_ledger, table_version
from tables.delta.ledger import admin_metadata
from tables.delta.maintenance import check_vacuum_retention, optimize, vacuum
from tables.delta.markers import committed_batches
from tables.delta.table import table_detail
from tables.delta.writer import TableWriter
from tables.errors import ConfigError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
WEEK = timedelta(days=7)


def test_retention_checks() -> None:
    check_vacuum_retention(168, WEEK, WEEK, force=False)
    with pytest.raises(ConfigError, match="shorter than the replay window"):
        check_vacuum_retention(24, WEEK, WEEK, force=True)
    with pytest.raises(ConfigError, match="pass --force"):
        check_vacuum_retention(24, WEEK, timedelta(hours=1), force=False)
    check_vacuum_retention(24, WEEK, timedelta(hours=1), force=True)
    with pytest.raises(ConfigError, match="whole number"):
        check_vacuum_retention(1.5, WEEK, timedelta(0), force=True)  # type: ignore[arg-type]


def commit(spark: SparkSession, spec: TableSpec, batch_id: int, rows: int = 5) -> None:
    frame = spark.createDataFrame(
        [(f"e{batch_id}-{i}", "u", 1.0) for i in range(rows)],
        "event_id string, user_id string, amount double",
    )
    commit_batch(TableWriter(spark, spec, "app"), batch_id, frame)


def test_vacuum_refuses_unsafe_retention(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    with pytest.raises(ConfigError, match="pass --force"):
        vacuum(spark, spec.name, retain_hours=1, replay_window=timedelta(0))
    with pytest.raises(ConfigError, match="replay window"):
        vacuum(spark, spec.name, retain_hours=1, replay_window=WEEK, force=True)


def test_vacuum_keeps_time_travel_within_retention_and_removes_debris_beyond(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    commit(spark, spec, 0)
    commit(spark, spec, 1)
    spark.sql(f"DELETE FROM {spec.name} WHERE _lh_batch_id = 0")
    latest = table_version(spark, spec.name)
    location = table_detail(spark, spec.name).location
    directory = Path(location.removeprefix("file:"))
    # A data file written by a commit that never landed: abort debris.
    orphan = directory / "part-99999-orphan-of-an-aborted-commit.snappy.parquet"
    shutil.copyfile(next(directory.rglob("part-*.parquet")), orphan)
    no_window = timedelta(0)

    kept = vacuum(spark, spec.name, retain_hours=1, replay_window=no_window, force=True)
    for version in range(latest + 1):
        rows = spark.sql(f"SELECT event_id FROM {spec.name} VERSION AS OF {version}").collect()
        assert len(rows) == {0: 0, 1: 5, 2: 10}.get(version, 5)

    listed = vacuum(
        spark, spec.name, retain_hours=0, replay_window=no_window, force=True, dry_run=True
    )
    assert orphan.exists()
    upkeep = admin_metadata("app", 1, "maintenance", {"kind": "maintenance", "operation": "vac"})
    done = vacuum(
        spark, spec.name, retain_hours=0, replay_window=no_window, force=True, meta=upkeep
    )

    assert not [f for f in kept.files if f.endswith(".parquet")]
    assert listed.files == done.files
    assert f"{location}/{orphan.name}" in done.files
    assert done.size_bytes > 0
    assert all(f.startswith(location) for f in done.files)
    assert not orphan.exists()
    assert len(spark.sql(f"SELECT event_id FROM {spec.name}").collect()) == 5
    # The VACUUM that deleted files is in the ledger (Delta's START and END commits carry it).
    recorded = [e for e in read_ledger(spark, spec.name) if e.meta.kind == "maintenance"]
    assert {e.meta.source["operation"] for e in recorded} == {"vac"}
    assert {e.meta.commit_token for e in recorded} == {upkeep.commit_token}
    with pytest.raises(Exception, match=r"FileNotFound|does not exist|FAILED_READ_FILE"):
        spark.sql(f"SELECT event_id FROM {spec.name} VERSION AS OF {latest - 1}").collect()


def test_optimize_compacts_and_leaves_rows_and_ledger(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    for batch_id in range(4):
        commit(spark, spec, batch_id)
    rows = sorted(r["event_id"] for r in spark.table(spec.name).collect())
    ledger = [(e.meta.batch_id, e.version) for e in read_ledger(spark, spec.name)]

    report = optimize(spark, spec.name)

    assert report.files_before >= 4
    assert report.files_after == 1
    assert sorted(r["event_id"] for r in spark.table(spec.name).collect()) == rows
    assert [(e.meta.batch_id, e.version) for e in read_ledger(spark, spec.name)] == ledger
    assert committed_batches(spark, spec.name) == {"app": 3}


def test_optimize_rejects_unknown_zorder_columns(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    with pytest.raises(ConfigError, match="not in"):
        optimize(spark, spec.name, ["nope"])
