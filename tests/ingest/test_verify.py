"""`lakehouse verify`: passes on a table ingested as users do, fails on tables damaged on
purpose (a duplicated key, a ledger gap, a moved marker, rows deleted by hand)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from typer.testing import CliRunner

from ingest.admin import verify as verify_module
from ingest.admin.verdict import is_outside_ledger, ledger_gaps, marker_findings, row_findings
from ingest.admin.verify import verify_table
from ingest.cli.commands import app
from ingest.commit import commit_batch
from tables.delta.commits import commit_markers
from tables.delta.ledger import CommitMetadata, LedgerEntry, admin_metadata
from tables.delta.writer import TableWriter
from tables.spec import TableSpec
from tests.support.processes import run_lakehouse

pytestmark = pytest.mark.downstream
MakeTable = Callable[..., TableSpec]
runner = CliRunner()

CONFIG = """
[lakehouse]
home = "state"

[tables.vf_events]
schema = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"
keys = ["event_id"]

[pipelines.vf_landing]
table = "vf_events"
[pipelines.vf_landing.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""


def test_gaps_are_the_batches_no_entry_records_below_the_marker() -> None:
    assert ledger_gaps(4, [0, 1, 3, 4], []) == [2]
    assert ledger_gaps(4, [0, 4], [2]) == [3]  # a forward reset to 2 skipped 1 and 2
    assert ledger_gaps(-1, [], []) == []


@pytest.mark.parametrize(
    ("operation", "metadata", "outside"),
    [
        ("DELETE", None, True),
        ("WRITE", "", True),
        ("MERGE", '{"lakehouse":1}', False),
        ("OPTIMIZE", None, False),
        ("CREATE TABLE", None, False),
        ("SET TBLPROPERTIES", None, False),
    ],
)
def test_a_commit_outside_the_ledger(operation: str, metadata: str | None, outside: bool) -> None:
    assert is_outside_ledger(operation, metadata) is outside


def test_markers_a_crash_or_the_bulk_append_explains_are_notes_not_findings() -> None:
    found, notes = marker_findings("a", target=4, quarantine=5, audit=2, rejecting={1})
    assert found == []
    assert len(notes) == 2

    found, _ = marker_findings("a", target=4, quarantine=7, audit=6, rejecting={1})
    assert [f.kind for f in found] == ["marker", "marker"]

    found, _ = marker_findings("a", target=4, quarantine=3, audit=4, rejecting={1})
    assert "rejected no row" in found[0].detail


def entry(version: int, batch_id: int, inserted: int) -> LedgerEntry:
    meta = CommitMetadata("a", batch_id, {}, 5, 0, "h", f"t{version}")
    return LedgerEntry(version, datetime.now(UTC), "MERGE", meta, 5, inserted)


def test_a_batch_committed_again_after_a_reset_is_checked_against_all_its_entries() -> None:
    # reset-app to -1, then the same batches again: the second entries insert nothing new
    entries = [entry(1, 0, 5), entry(2, 1, 5), entry(4, 0, 0), entry(5, 1, 0)]
    assert row_findings(entries, {("a", 0): 5, ("a", 1): 5}, {}) == []
    found = row_findings(entries, {("a", 0): 4, ("a", 1): 5}, {})
    assert [(f.kind, f.batch_id) for f in found] == [("table_rows", 0)]


@pytest.fixture(scope="module")
def project(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three files ingested through the CLI with a crash-free run and a re-run (a no-op)."""
    root = tmp_path_factory.mktemp("verify")
    (root / "lakehouse.toml").write_text(CONFIG)
    landing = root / "landing"
    landing.mkdir()
    for n in range(3):
        lines = [json.dumps({"event_id": f"e{n}-{i}", "amount": 1.0}) for i in range(4)]
        lines += [lines[0], "{not json"]
        (landing / f"{n}.json").write_text("\n".join(lines) + "\n")
    for _ in range(2):
        result = runner.invoke(app, ["ingest", "-c", str(root / "lakehouse.toml")])
        assert result.exit_code == 0, result.output
    return root


def test_verify_passes_on_a_table_ingested_as_users_do(project: Path) -> None:
    result = runner.invoke(app, ["verify", "vf_events", "-c", str(project / "lakehouse.toml")])

    assert result.exit_code == 0, result.output
    assert "vf_events: 1 app id(s), 3 batch(es) checked, 0 finding(s): exactly once holds" in (
        result.stderr
    )


def test_verify_fails_in_one_table_naming_the_duplicated_key(
    spark: SparkSession, project: Path
) -> None:
    [(batch_id,)] = spark.sql(
        "SELECT _lh_batch_id FROM vf_events WHERE event_id = 'e1-2'"
    ).collect()
    spark.sql("INSERT INTO vf_events SELECT * FROM vf_events WHERE event_id = 'e1-2'")

    result = runner.invoke(
        app, ["verify", "vf_events", "-c", str(project / "lakehouse.toml"), "-f", "json"]
    )

    assert result.exit_code == 1, result.output
    found = {f["finding"]: f for f in json.loads(result.stdout)}
    assert set(found) == {"duplicate_keys", "outside_ledger", "table_rows"}
    assert "e1-2" in found["duplicate_keys"]["detail"]
    assert (found["table_rows"]["app_id"], found["table_rows"]["batch_id"]) == (
        "vf_landing",
        batch_id,
    )
    assert "3 finding(s): FAILED" in result.stderr


def rows(spark: SparkSession, ids: list[str | None]) -> DataFrame:
    return spark.createDataFrame(
        [(i, "u", 1.0) for i in ids], "event_id string, user_id string, amount double"
    )


def test_a_ledger_gap_is_found(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "a"), 0, rows(spark, ["x"]))
    commit_batch(
        TableWriter(spark, spec, "a"), 3, rows(spark, ["y"])
    )  # batches 1 and 2 never committed

    verdict = verify_table(spark, spec)

    assert [(f.kind, f.app_id, f.batch_id) for f in verdict.findings] == [("ledger_gap", "a", 1)]
    assert "no ledger entry records batch(es) 1-2" in verdict.findings[0].detail


def test_a_moved_marker_is_found(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "a"), 0, rows(spark, ["x", None]))  # one row rejected
    commit_batch(TableWriter(spark, spec, "a"), 1, rows(spark, ["y"]))
    assert verify_table(spark, spec).passed
    commit_markers(
        spark, spec.quarantine_name, {"a": 6}, admin_metadata("a", 6, "reset", {"by": "test"})
    )

    verdict = verify_table(spark, spec)

    assert [(f.kind, f.batch_id) for f in verdict.findings] == [("marker", 6)]
    assert "the quarantine marker is 6, above the target's 1 + 1" in verdict.findings[0].detail


def test_a_batch_committed_while_verify_reads_is_not_a_finding(
    spark: SparkSession, make_table: MakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`verify` in a second shell while a pipeline commits: the reads are pinned to one version."""
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "a"), 0, rows(spark, ["x", None]))
    read_history = verify_module.history_rows

    def history_after_a_commit(*args: object) -> list[dict[str, object]]:
        # A fault point: the pipeline's next batch lands between verify's reads.
        commit_batch(TableWriter(spark, spec, "a"), 1, rows(spark, ["y", None]))
        return read_history(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(verify_module, "history_rows", history_after_a_commit)
    verdict = verify_table(spark, spec)
    monkeypatch.undo()

    assert verdict.passed, verdict.findings
    assert verdict.batches == 1
    assert verify_table(spark, spec).batches == 2


def test_rows_deleted_by_hand_are_found(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "a"), 0, rows(spark, ["x", "y", None]))
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id = 'y'")
    spark.sql(f"DELETE FROM {spec.quarantine_name}")

    verdict = verify_table(spark, spec, app_id="a")

    assert sorted(f.kind for f in verdict.findings) == [
        "outside_ledger",
        "quarantine_rows",
        "table_rows",
    ]


@pytest.mark.slow
def test_verify_passes_on_the_demos_table_after_its_crash_and_restart(tmp_path: Path) -> None:
    """The demo as `make demo` runs it: a crash right after batch 1's commit, a restart."""
    demo = Path(__file__).resolve().parents[2] / "examples" / "demo"
    shutil.copy(demo / "lakehouse.toml", tmp_path)
    subprocess.run(
        [sys.executable, str(demo / "generate.py"), "landing/events"], cwd=tmp_path, check=True
    )

    crashed = run_lakehouse(tmp_path, "ingest", "events", fault="after_commit:exit@1")
    restarted = run_lakehouse(tmp_path, "ingest", "events")
    verified = run_lakehouse(tmp_path, "verify", "events")

    assert crashed.returncode != 0
    assert restarted.returncode == 0, restarted.stderr
    assert "batch 1: skipped" in restarted.stderr
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "0 finding(s): exactly once holds" in verified.stderr
