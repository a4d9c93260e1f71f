"""Listing app ids and moving a marker explicitly."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.admin.apps import list_apps, reset_app, reset_direction, validate_reset
from ingest.commit import commit_batch
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batch
from tables.delta.writer import TableWriter
from tables.errors import CheckpointLostError, ConfigError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def test_reset_direction_and_validation() -> None:
    assert reset_direction(5, 2) == "back"
    assert reset_direction(5, 5) == "same"
    assert reset_direction(5, 7) == "forward"
    assert reset_direction(None, 3) == "back"
    with pytest.raises(ConfigError, match="forward"):
        validate_reset(5, 7, force=False)
    assert validate_reset(5, 7, force=True) == "forward"
    with pytest.raises(ConfigError, match="-1"):
        validate_reset(5, -2, force=True)


def test_list_apps(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    frame = spark.createDataFrame(
        [("e1", "u", 1.0)], "event_id string, user_id string, amount double"
    )
    commit_batch(TableWriter(spark, spec, "a"), 3, frame)
    commit_batch(TableWriter(spark, spec, "b"), 0, frame)

    states = list_apps(spark, spec.name)

    assert [(s.app_id, s.last_batch) for s in states] == [("a", 3), ("b", 0)]
    assert all(s.last_version is not None for s in states)


def test_reset_after_a_lost_checkpoint_lets_a_fresh_one_start(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.json").write_text(json.dumps({"event_id": "e1", "user_id": "u", "amount": 1.0}))
    job = PipelineSpec(
        "p",
        spec.name,
        "p",
        FileSource(str(landing), "json"),
        "available-now",
        str(tmp_path / "checkpoint"),
    )
    run_pipeline(spark, job, spec)
    shutil.rmtree(job.checkpoint)
    with pytest.raises(CheckpointLostError):
        run_pipeline(spark, job, spec)

    version = reset_app(spark, spec.name, "p", -1)
    report = run_pipeline(spark, job, spec)

    assert committed_batch(spark, spec.name, "p") == 0
    assert [r.status for r in report.results] == ["committed"]
    # The re-run batch 0 matches the row batch 0 already landed: the MERGE adds no duplicate.
    assert (report.results[0].rows_inserted, report.results[0].rows_already_present) == (0, 1)
    assert spark.table(spec.name).count() == 1
    kinds = [(e.meta.kind, e.meta.batch_id) for e in read_ledger(spark, spec.name)]
    assert kinds == [("batch", 0), ("reset", -1), ("batch", 0)]
    assert read_ledger(spark, spec.name)[1].version == version
