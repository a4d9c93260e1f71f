"""Scheduled upkeep of a long run (`[tables.X.maintenance]`): when, what; it moves no row."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.admin.verify import verify_table
from ingest.config import PipelineSpec, load_config
from ingest.maintenance import companions
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batch
from tables.delta.table import table_detail
from tables.delta.writer import TableWriter
from tables.errors import ConfigError
from tables.faults import ENV_VAR
from tables.maintenance_policy import (
    MaintenancePolicy,
    is_every_nth,
    should_compact_companion,
    should_optimize,
    should_vacuum,
)
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def test_every_nth_counts_batch_ids_from_zero_and_zero_is_off() -> None:
    assert [b for b in range(9) if is_every_nth(b, 3)] == [2, 5, 8]
    assert not any(is_every_nth(b, 0) for b in range(9))
    policy = MaintenancePolicy(optimize_every=4, optimize_max_files=10, vacuum_every=5)
    assert [b for b in range(10) if should_optimize(policy, b, added_files=3)] == [3, 7]
    assert should_optimize(policy, 0, added_files=11)
    assert not should_optimize(policy, 0, added_files=10)
    assert [b for b in range(10) if should_vacuum(policy, b)] == [4, 9]
    assert not MaintenancePolicy().is_on
    assert should_compact_companion(policy, 3, files=9)
    assert not should_compact_companion(policy, 3, files=8)
    assert not should_compact_companion(policy, 2, files=100)
    assert MaintenancePolicy(optimize_max_files=1).watches_files


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_a_policy_takes_whole_numbers_only(bad: object) -> None:
    with pytest.raises(ConfigError, match="optimize_every must be a whole number >= 0"):
        MaintenancePolicy(optimize_every=bad)  # type: ignore[arg-type]


def test_the_config_reads_the_maintenance_table_and_names_a_bad_key(tmp_path: Path) -> None:
    base = '[tables.events]\nschema = "event_id STRING"\nkeys = ["event_id"]\n'
    config = tmp_path / "lakehouse.toml"
    config.write_text(base + "[tables.events.maintenance]\noptimize_every = 100\n")
    assert load_config(config).tables["events"].maintenance == MaintenancePolicy(100, 0, 0)

    config.write_text(base + "[tables.events.maintenance]\noptimise_every = 100\n")
    with pytest.raises(ConfigError, match="optimise_every"):
        load_config(config)
    config.write_text(base + "[tables.events.maintenance]\nvacuum_every = -2\n")
    with pytest.raises(ConfigError, match=r"vacuum_every.*whole number >= 0, got -2"):
        load_config(config)


def landed_pipeline(
    root: Path, spec: TableSpec, app_id: str, *, files: int, rows: int, cut_off: bool = False
) -> PipelineSpec:
    """A pipeline of `files` landed JSON files of `rows` events each, one file per batch; with
    `cut_off`, each file ends with a record cut off mid-line (quarantined)."""
    landing = root / "landing"
    landing.mkdir()
    for n in range(files):
        events = [{"event_id": f"e{n}-{i}", "user_id": "u", "amount": 1.0} for i in range(rows)]
        lines = [json.dumps(e) for e in events] + (['{"event_id": "cut'] if cut_off else [])
        (landing / f"{n}.json").write_text("\n".join(lines) + "\n")
    return PipelineSpec(
        name=app_id,
        table=spec.name,
        app_id=app_id,
        source=FileSource(str(landing), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(root / "checkpoint"),
    )


def test_a_run_compacts_and_vacuums_between_batches_and_every_row_stays_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    policy = MaintenancePolicy(optimize_every=2, vacuum_every=4)
    spec = make_table(maintenance=policy)
    job = landed_pipeline(tmp_path, spec, "kept", files=4, rows=5)

    report = run_pipeline(spark, job, spec)

    assert [r.status for r in report.results] == ["committed"] * 4
    assert [(m.batch_id, m.operation) for m in report.maintenance if m.table == spec.name] == [
        (1, "optimize"),
        (3, "optimize"),
        (3, "vacuum"),
    ]
    # The companions (the quality table once a run appended to it) at the same turn.
    companions_done = [
        (m.table, m.batch_id, m.operation) for m in report.maintenance if m.table != spec.name
    ]
    assert (spec.quarantine_name, 3, "vacuum") in companions_done
    assert {t for t, _, _ in companions_done} <= {spec.quarantine_name, "lakehouse_quality"}
    compacted = re.fullmatch(r"(\d+) files before, 1 after", report.maintenance[0].detail)
    assert compacted is not None, report.maintenance[0].detail
    assert int(compacted.group(1)) > 1
    assert table_detail(spark, spec.name).num_files == 1
    kinds = [
        (e.meta.kind, e.meta.batch_id, e.meta.source.get("operation"))
        for e in read_ledger(spark, spec.name, app_id="kept")
    ]
    assert ("maintenance", 1, "optimize") in kinds
    assert ("maintenance", 3, "optimize") in kinds
    assert sorted(b for k, b, _ in kinds if k == "batch") == [0, 1, 2, 3]
    assert committed_batch(spark, spec.name, "kept") == 3
    counted = spark.table(spec.name).groupBy("event_id").count().collect()
    assert len(counted) == 20
    assert {r["count"] for r in counted} == {1}
    assert verify_table(spark, spec).passed
    assert run_pipeline(spark, job, spec).maintenance == []  # nothing new, no upkeep


def test_the_quarantine_and_quality_tables_are_compacted_at_the_tables_turn(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(maintenance=MaintenancePolicy(optimize_every=10))
    job = landed_pipeline(tmp_path, spec, "companions", files=10, rows=2, cut_off=True)

    report = run_pipeline(spark, job, spec)

    assert [r.status for r in report.results] == ["committed"] * 10
    done = {m.table: m for m in report.maintenance}
    assert done[spec.quarantine_name].detail == "10 files before, 1 after"
    assert not any(m.failed for m in report.maintenance)
    assert table_detail(spark, spec.quarantine_name).num_files == 1
    # The quality table grows by an append per flush of the outcomes (seconds apart), not per
    # batch: the same rule compacts it at the turn it holds more than a few files.
    assert companions(TableWriter(spark, spec, "companions")) == [
        spec.quarantine_name,
        "lakehouse_quality",
    ]
    assert spark.table(spec.quarantine_name).count() == 10
    kinds = [(e.meta.kind, e.meta.batch_id) for e in read_ledger(spark, spec.quarantine_name)]
    assert ("maintenance", 9) in kinds
    assert verify_table(spark, spec).passed


def test_a_failed_upkeep_is_reported_and_the_run_goes_on(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table(maintenance=MaintenancePolicy(optimize_every=1))
    job = landed_pipeline(tmp_path, spec, "upkept", files=3, rows=3)
    monkeypatch.setenv(ENV_VAR, "before_maintenance:raise@1")

    report = run_pipeline(spark, job, spec)

    assert [r.status for r in report.results] == ["committed"] * 3
    outcomes = [(m.batch_id, m.failed) for m in report.maintenance]
    assert outcomes == [(0, False), (1, True), (2, False)]
    assert report.maintenance[1].detail.startswith("failed, tried again at its next turn: ")
    assert report.maintenance[1].detail.endswith("fault injected at before_maintenance for batch 1")
    assert spark.table(spec.name).count() == 9
