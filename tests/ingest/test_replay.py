"""Replay and replace of committed batches from their recorded source files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from ingest.admin.replay import ReplayOptions, assert_sources_present, plan_replay, replay_batch
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger, table_version
from tables.delta.writer import TableWriter
from tables.errors import InjectedFaultError, TerminalError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def land(spark: SparkSession, spec: TableSpec, tmp_path: Path, files: int = 2) -> PipelineSpec:
    """Ingest `files` JSON files of 10 events each, one batch per file."""
    landing = tmp_path / "landing"
    landing.mkdir()
    for n in range(files):
        rows = [{"event_id": f"e{n}-{i}", "user_id": "u", "amount": float(i)} for i in range(10)]
        (landing / f"{n}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        os.utime(landing / f"{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    job = PipelineSpec(
        name="land",
        table=spec.name,
        app_id="land",
        source=FileSource(str(landing), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    run_pipeline(spark, job, spec)
    return job


def data(spark: SparkSession, table: str) -> DataFrame:
    return spark.table(table).select("_lh_app_id", "_lh_batch_id", "event_id", "user_id", "amount")


def test_replay_restores_exactly_the_deleted_rows(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    job = land(spark, spec, tmp_path)
    before = data(spark, spec.name).collect()
    spark.sql(f"DELETE FROM {spec.name} WHERE _lh_batch_id = 1 AND event_id IN ('e1-3', 'e1-7')")

    plans = plan_replay(spark, spec, "land", 0, 1, job.source)
    results = [
        replay_batch(TableWriter(spark, spec, plan.entry.meta.app_id), plan) for plan in plans
    ]

    assert [(r.batch_id, r.rows_restored, r.rows_already_present) for r in results] == [
        (0, 0, 10),
        (1, 2, 8),
    ]
    assert_df_equality(
        data(spark, spec.name),
        spark.createDataFrame(before, data(spark, spec.name).schema),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # The intact batch 0 made no commit at all: Delta skips a MERGE with nothing to write.
    kinds = [(e.meta.kind, e.meta.batch_id) for e in read_ledger(spark, spec.name)]
    assert kinds == [("replay", 1), ("batch", 1), ("batch", 0)]
    assert results[0].version is None


def test_replay_of_intact_batches_changes_no_row(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    job = land(spark, spec, tmp_path)
    before = spark.table(spec.name)
    snapshot = before.collect()

    for plan in plan_replay(spark, spec, "land", 0, None, job.source):
        assert (
            replay_batch(TableWriter(spark, spec, plan.entry.meta.app_id), plan).rows_restored == 0
        )

    assert_df_equality(
        spark.table(spec.name),
        spark.createDataFrame(snapshot, before.schema),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def test_dry_run_writes_nothing(spark: SparkSession, make_table: MakeTable, tmp_path: Path) -> None:
    spec = make_table()
    job = land(spark, spec, tmp_path)
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id = 'e0-1'")
    version = table_version(spark, spec.name)

    [first, _] = [
        replay_batch(TableWriter(spark, spec, p.entry.meta.app_id), p, ReplayOptions(dry_run=True))
        for p in plan_replay(spark, spec, "land", 0, 1, job.source)
    ]

    assert (first.rows_restored, first.rows_already_present, first.dry_run) == (1, 9, True)
    assert table_version(spark, spec.name) == version


def test_missing_source_files_stop_before_any_write(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    job = land(spark, spec, tmp_path)
    (tmp_path / "landing" / "1.json").unlink()
    version = table_version(spark, spec.name)

    plans = plan_replay(spark, spec, "land", 0, 1, job.source)
    with pytest.raises(TerminalError, match=r"nothing was replayed: batch 1: .*1\.json"):
        assert_sources_present(spark, plans)

    assert table_version(spark, spec.name) == version


def test_replace_rewrites_a_batch_in_one_commit(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    job = land(spark, spec, tmp_path)
    expected = data(spark, spec.name).collect()
    spark.sql(f"UPDATE {spec.name} SET amount = -1 WHERE _lh_batch_id = 1 AND event_id = 'e1-0'")
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id = 'e1-1'")
    spark.sql(
        f"INSERT INTO {spec.name} VALUES ('land', 1, current_timestamp(), 'stray', 'u', 0.0, NULL)"
    )
    version = table_version(spark, spec.name)

    [plan] = plan_replay(spark, spec, "land", 1, 1, job.source)
    result = replay_batch(
        TableWriter(spark, spec, plan.entry.meta.app_id), plan, ReplayOptions(mode="replace")
    )

    assert (result.rows_restored, result.rows_deleted, result.version) == (1, 1, version + 1)
    assert_df_equality(
        data(spark, spec.name),
        spark.createDataFrame(expected, data(spark, spec.name).schema),
        ignore_row_order=True,
        ignore_nullable=True,
    )


@pytest.mark.parametrize(("fault", "replaced"), [("before_write", False), ("after_commit", True)])
def test_replace_is_atomic_around_a_crash(
    spark: SparkSession,
    make_table: MakeTable,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    replaced: bool,
) -> None:
    spec = make_table()
    job = land(spark, spec, tmp_path)
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id IN ('e1-1', 'e1-2')")
    spark.sql(
        f"INSERT INTO {spec.name} VALUES ('land', 1, current_timestamp(), 'stray', 'u', 0.0, NULL)"
    )
    [plan] = plan_replay(spark, spec, "land", 1, 1, job.source)
    monkeypatch.setenv("LAKEHOUSE_FAULT", f"{fault}:raise")

    with pytest.raises(InjectedFaultError):
        replay_batch(
            TableWriter(spark, spec, plan.entry.meta.app_id), plan, ReplayOptions(mode="replace")
        )

    ids = {r["event_id"] for r in spark.table(spec.name).where("_lh_batch_id = 1").collect()}
    new = {f"e1-{i}" for i in range(10)}
    old = (new - {"e1-1", "e1-2"}) | {"stray"}
    assert ids == (new if replaced else old)


@pytest.mark.parametrize("name", ["day 1 100%41.json", "a [b] {c}*?.json"])
def test_replay_reads_a_file_whose_name_spark_escapes(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, name: str
) -> None:
    """The ledger records `_metadata.file_path`, URL-encoded (`day%201%20100%2541.json`).

    Replay used to hand that text back to Spark, which found no such file; a name with glob
    characters must be read as itself, not as a pattern.
    """
    spec = make_table()
    landing = tmp_path / "landing"
    landing.mkdir()
    rows = [{"event_id": f"e{i}", "user_id": "u", "amount": float(i)} for i in range(3)]
    (landing / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    job = PipelineSpec(
        "odd",
        spec.name,
        "odd",
        FileSource(str(landing), "json"),
        "available-now",
        str(tmp_path / "checkpoint"),
    )
    run_pipeline(spark, job, spec)
    [entry] = read_ledger(spark, spec.name)
    assert entry.meta.source["files"][0].endswith("%20100%2541.json" if "%" in name else ".json")
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id = 'e1'")

    plans = plan_replay(spark, spec, "odd", 0, 0, job.source)
    assert_sources_present(spark, plans)
    [result] = [
        replay_batch(TableWriter(spark, spec, plan.entry.meta.app_id), plan) for plan in plans
    ]

    assert (result.rows_source, result.rows_restored, result.rows_already_present) == (3, 1, 2)
    assert sorted(r["event_id"] for r in spark.table(spec.name).collect()) == ["e0", "e1", "e2"]
