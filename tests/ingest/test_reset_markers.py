"""reset-app moves every marker the app owns, and a reset cut short is found and finished.

Issue 16, finding 6: a reset moved the target's marker only, so re-run batches' rejected rows and
audit findings were skipped by the quarantine and audit markers while the ledger counted them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.admin.apps import is_reset_ruled_out, pending_reset, recorded_moves, reset_app
from ingest.cli.commands import app
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from quality.check_results import quality_table_name
from quality.marker_names import batch_markers
from tables.delta.commits import commit_markers
from tables.delta.ledger import CommitKind, CommitMetadata, LedgerEntry, admin_metadata
from tables.delta.markers import committed_batch
from tables.errors import InjectedFaultError
from tables.faults import ENV_VAR
from tables.spec import BATCH_ID_COLUMN, TableSpec
from tests.support.jobs import spark_jobs

MakeTable = Callable[..., TableSpec]
T = TypeVar("T")
runner = CliRunner()


def test_a_batch_names_its_three_markers_in_one_place() -> None:
    target, quarantine, audit = batch_markers("events", "landing")

    assert (target.table, target.txn_app_id) == ("events", "landing")
    assert (quarantine.table, quarantine.txn_app_id) == ("events_quarantine", "landing")
    assert (audit.table, audit.txn_app_id) == ("lakehouse_quality", "audit.events.landing")
    assert quality_table_name("db.events") == "db.lakehouse_quality"


def ingested(spark: SparkSession, spec: TableSpec, tmp_path: Path) -> PipelineSpec:
    """Batch 0 of app `p` committed: two good rows and one rejected row, audited."""
    landing = tmp_path / "landing"
    landing.mkdir()
    rows = [
        {"event_id": "e1", "user_id": "u", "amount": 1.0},
        {"event_id": "e2", "user_id": "u", "amount": 2.0},
        {"event_id": None, "user_id": "u", "amount": 3.0},
    ]
    (landing / "a.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    job = PipelineSpec(
        "p", spec.name, "p", FileSource(str(landing), "json"), "available-now", str(tmp_path / "cp")
    )
    run_pipeline(spark, job, spec)
    return job


def reset_cut_short(
    spark: SparkSession, spec: TableSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 0 of app `p` ingested, then its reset to -1 stopped after the target's commit."""
    ingested(spark, spec, tmp_path)
    monkeypatch.setenv(ENV_VAR, "mid_reset:raise@-1")
    with pytest.raises(InjectedFaultError):
        reset_app(spark, spec.name, "p", -1)
    monkeypatch.delenv(ENV_VAR)


def markers(spark: SparkSession, spec: TableSpec) -> list[int | None]:
    return [committed_batch(spark, m.table, m.txn_app_id) for m in batch_markers(spec.name, "p")]


def batch_zero_rows(spark: SparkSession, table: str, app_column: str = "_lh_app_id") -> int:
    return spark.table(table).where(f"{app_column} = 'p' AND {BATCH_ID_COLUMN} = 0").count()


def audit_rows(spark: SparkSession, spec: TableSpec) -> int:
    quality = spark.table(quality_table_name(spec.name))
    return quality.where(f"table_name = '{spec.name}' AND app_id = 'p' AND batch_id = 0").count()


def test_reset_moves_all_three_markers_and_rerun_batches_land_their_rejects(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    job = ingested(spark, spec, tmp_path)
    assert markers(spark, spec) == [0, 0, 0]
    assert (batch_zero_rows(spark, spec.quarantine_name), audit_rows(spark, spec)) == (1, 1)

    reset_app(spark, spec.name, "p", -1)
    shutil.rmtree(job.checkpoint)
    report = run_pipeline(spark, job, spec)

    assert [r.rows_quarantined for r in report.results] == [1]
    assert markers(spark, spec) == [0, 0, 0]
    # The re-run batch 0 wrote its rejected row and its audit again: nothing skipped silently.
    assert (batch_zero_rows(spark, spec.quarantine_name), audit_rows(spark, spec)) == (2, 2)
    assert spark.table(spec.name).count() == 2


def test_a_reset_cut_short_is_reported_and_finished_by_reset_app(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    reset_cut_short(spark, spec, tmp_path, monkeypatch)

    assert markers(spark, spec) == [-1, 0, 0]
    pending = pending_reset(spark, spec.name, "p")
    assert pending is not None
    assert [m.role for m, _ in pending.behind] == ["quarantine", "audit"]

    rerun = runner.invoke(
        app, ["reset-app", spec.name, "--app-id", "p", "--to-batch", "-1", "--yes"]
    )

    assert rerun.exit_code == 0, rerun.output
    assert "is half done" in rerun.stderr
    assert f"{spec.quarantine_name} (p) still at 0" in rerun.stderr
    assert "finishing it" in rerun.stderr
    assert "already -1; nothing to do" in rerun.stdout
    assert markers(spark, spec) == [-1, -1, -1]
    assert pending_reset(spark, spec.name, "p") is None


def test_the_next_ingest_finishes_a_reset_cut_short(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    job = ingested(spark, spec, tmp_path)
    monkeypatch.setenv(ENV_VAR, "mid_reset:raise@-1")
    with pytest.raises(InjectedFaultError):
        reset_app(spark, spec.name, "p", -1)
    monkeypatch.delenv(ENV_VAR)
    shutil.rmtree(job.checkpoint)

    report = run_pipeline(spark, job, spec)

    assert report.finished_reset is not None
    assert "half done" in report.finished_reset
    assert [r.rows_quarantined for r in report.results] == [1]
    assert batch_zero_rows(spark, spec.quarantine_name) == 2
    assert markers(spark, spec) == [0, 0, 0]


def test_a_forward_reset_moves_all_three_markers_to_the_batch(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    ingested(spark, spec, tmp_path)

    result = runner.invoke(
        app, ["reset-app", spec.name, "--app-id", "p", "--to-batch", "5", "--force", "--yes"]
    )

    assert result.exit_code == 0, result.output
    assert "moved from 0 to 5" in result.stdout
    assert "quarantine and audit markers are at 5 too" in result.stdout
    assert markers(spark, spec) == [5, 5, 5]
    assert pending_reset(spark, spec.name, "p") is None


def test_a_forward_reset_cut_short_is_found_and_finished(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    ingested(spark, spec, tmp_path)
    monkeypatch.setenv(ENV_VAR, "mid_reset:raise@3")
    with pytest.raises(InjectedFaultError):
        reset_app(spark, spec.name, "p", 3)
    monkeypatch.delenv(ENV_VAR)

    assert markers(spark, spec) == [3, 0, 0]
    pending = pending_reset(spark, spec.name, "p")
    assert pending is not None
    assert [(m.role, at) for m, at in pending.behind] == [("quarantine", 0), ("audit", 0)]

    reset_app(spark, spec.name, "p", 3)

    assert markers(spark, spec) == [3, 3, 3]
    assert pending_reset(spark, spec.name, "p") is None


def entry(app_id: str, kind: CommitKind) -> LedgerEntry:
    meta = CommitMetadata(app_id, 3, {}, 0, 0, "", "t", kind=kind)
    return LedgerEntry(4, datetime(2026, 1, 1), "MERGE", meta, 0, 0)


@pytest.mark.parametrize(
    ("newest", "version", "ruled_out"),
    [
        (None, 0, True),  # the table's creation alone
        (None, 3, False),  # a commit that is no ledger entry (OPTIMIZE, a user's write)
        (entry("p", "batch"), 4, True),  # the app's own batch: its latest entry
        (entry("p", "replay"), 4, True),
        (entry("p", "reset"), 4, False),
        (entry("other", "batch"), 4, False),  # the app's latest entry is further back
    ],
)
def test_the_newest_commit_rules_out_a_reset_only_where_it_is_the_apps_latest_entry(
    newest: LedgerEntry | None, version: int, ruled_out: bool
) -> None:
    assert is_reset_ruled_out(newest, version, "p") is ruled_out


def test_a_start_after_the_apps_own_batch_reads_no_history(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    assert spark_jobs(spark, lambda: pending_reset(spark, spec.name, "p")) == (None, 0)
    ingested(spark, spec, tmp_path)

    assert spark_jobs(spark, lambda: pending_reset(spark, spec.name, "p")) == (None, 0)


def test_a_reset_cut_short_is_found_behind_another_apps_commit(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    reset_cut_short(spark, spec, tmp_path, monkeypatch)
    commit_markers(spark, spec.name, {"other": 0}, admin_metadata("other", 0, "reset", {}))

    pending = pending_reset(spark, spec.name, "p")

    assert pending is not None
    assert [m.role for m, _ in pending.behind] == ["quarantine", "audit"]


def test_a_reset_target_below_minus_one_is_refused_before_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tables.engine.session

    asked: list[object] = []
    monkeypatch.setattr(tables.engine.session, "get_spark", lambda *a, **k: asked.append(a))
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(app, ["reset-app", "events", "--app-id", "p", "--to-batch", "-5"])

    assert result.exit_code == 1
    assert result.stderr == (
        "error: --to-batch must be -1 (nothing committed) or a batch id, got -5\n"
    )
    assert asked == []


def test_a_batch_cut_short_after_a_finished_reset_writes_its_rejects_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch after a reset writes its rejected rows, then crashes before its commit.

    Its quarantine marker is then above the reset's batch, as a reset back that never moved it
    would leave it: the next ingest must not take the reset for half done and roll the marker
    back, or the re-run batch writes its rejected rows a second time.
    """
    spec = make_table()
    job = ingested(spark, spec, tmp_path)
    reset_app(spark, spec.name, "p", -1)
    shutil.rmtree(job.checkpoint)
    monkeypatch.setenv(ENV_VAR, "before_write:raise@0")
    with pytest.raises(Exception, match="fault injected at before_write"):
        run_pipeline(spark, job, spec)
    monkeypatch.delenv(ENV_VAR)
    assert markers(spark, spec)[:2] == [-1, 0]
    assert batch_zero_rows(spark, spec.quarantine_name) == 2

    report = run_pipeline(spark, job, spec)

    # One rejected row from before the reset, one from the batch run again after it.
    assert batch_zero_rows(spark, spec.quarantine_name) == 2
    assert report.finished_reset is None
    assert [r.rows_quarantined for r in report.results] == [1]
    assert markers(spark, spec) == [0, 0, 0]
    assert spark.table(spec.name).count() == 2


def test_a_reset_entry_without_moves_is_judged_by_marker_levels() -> None:
    assert recorded_moves({"kind": "reset", "from": 0}) is None
    assert recorded_moves({"moves": [["t_quarantine", "p", 4]]}) == {("t_quarantine", "p"): 4}
