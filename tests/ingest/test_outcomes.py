"""The audit decided before a commit, its settlement after it, and the outcomes kept in bulk."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.config import PipelineSpec
from ingest.outcomes import audit_after_commit, outcomes_of, recover_outcomes
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from ingest.sources.file_read import raw_files
from quality.audit import audit_table
from quality.check_results import recent_results
from quality.marker_names import batch_markers
from tables.delta.history import latest_ledger_entry, table_version
from tables.delta.markers import committed_batch
from tables.delta.table import table_exists
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def events(spark: SparkSession, ids: list[str]) -> DataFrame:
    return spark.createDataFrame(
        [(i, "u", 1.0) for i in ids], "event_id string, user_id string, amount double"
    )


def test_the_commit_carries_its_audit_decided_on_the_version_it_read(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    first = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a", "b"]))
    second = commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, ["b", "c", "c"]))

    entry = latest_ledger_entry(spark, spec.name)
    assert entry is not None
    assert entry.meta.audit == {
        "status": "failed",
        "checked": 2,
        "failing": 1,
        "sample": ["b"],
        "as_of": first.version,
        "files_read": 1,
    }
    assert (second.read_version, second.version) == (first.version, first.version + 1)
    assert second.audit is not None
    assert (second.audit.batch_id, second.audit.version) == (1, second.version)


def test_an_audit_not_final_is_redone_on_the_committed_table(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """A commit that landed after another one than the version its audit read is audited again."""
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a"]))
    result = commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, ["a", "b"]))
    assert result.audit is not None
    assert result.read_version is not None
    stale = replace(
        result,
        read_version=result.read_version - 1,
        audit=replace(result.audit, status="passed", failing_keys=0, sample_keys=()),
    )

    [audit] = audit_after_commit(TableWriter(spark, spec, stale.app_id), stale)

    assert (audit.status, audit.failing_keys, audit.sample_keys) == ("failed", 1, ("a",))


def test_writers_racing_on_shared_keys_flag_every_duplicate(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """Two app ids commit overlapping keys at once; the audits together name every duplicate.

    Each writer audits before its commit on the version it read; a writer whose commit came
    after the other's is audited again after it, so no duplicate escapes both audits.
    """
    spec = make_table()
    flagged: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def write(app: str) -> None:
        try:
            for n in range(6):
                ids = [f"k{n}-{i}" for i in range(4)]
                result = commit_batch(TableWriter(spark, spec, app), n, events(spark, ids))
                for audit in audit_after_commit(TableWriter(spark, spec, result.app_id), result):
                    with lock:
                        flagged.extend(audit.sample_keys)
        except BaseException as exc:  # surfaced below, after both threads end
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(app,)) for app in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    full = audit_table(spark, spec)
    assert full.failing_keys == 24
    assert set(flagged) >= {f"k{n}-{i}" for n in range(6) for i in range(4)}


def test_a_rerun_batch_is_skipped_by_its_files_fingerprint_and_a_rewrite_is_hashed(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    landing.mkdir()
    data = landing / "a.json"
    data.write_text("\n".join(json.dumps({"event_id": f"e{i}", "amount": i}) for i in range(5)))
    source = FileSource(str(landing), "json")
    frame = raw_files(spark, source, [str(data)])

    with source.stream_batch(frame, spec) as (rows, record):
        committed = commit_batch(
            TableWriter(spark, spec, "app"),
            0,
            rows,
            CommitOptions(source=record, raw_format="json"),
        )
    with source.stream_batch(frame, spec) as (rows, record):
        again = commit_batch(
            TableWriter(spark, spec, "app"),
            0,
            rows,
            CommitOptions(source=record, raw_format="json"),
        )
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    with source.stream_batch(frame, spec) as (rows, record):
        touched = commit_batch(
            TableWriter(spark, spec, "app"),
            0,
            rows,
            CommitOptions(source=record, raw_format="json"),
        )

    assert committed.status == "committed"
    assert (again.status, again.note.endswith("same source fingerprint")) == ("skipped", True)
    assert touched.status == "skipped"
    assert not touched.note.endswith("same source fingerprint")
    assert touched.content_hash == committed.content_hash


def file_pipeline(tmp_path: Path, spec: TableSpec) -> PipelineSpec:
    return PipelineSpec(
        name="landing",
        table=spec.name,
        app_id="landing",
        source=FileSource(str(tmp_path / "landing"), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoints"),
    )


def test_a_run_appends_its_outcomes_in_bulk_under_the_audit_marker(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    landing.mkdir()
    for n in range(3):
        ids = [f"f{n}-{i}" for i in range(3)]
        (landing / f"{n}.json").write_text("\n".join(json.dumps({"event_id": i}) for i in ids))

    marker = batch_markers(spec.name, "landing")[2]
    before = table_version(spark, marker.table) if table_exists(spark, marker.table) else -1

    report = run_pipeline(spark, file_pipeline(tmp_path, spec), spec)

    assert report.count("committed") == 3
    assert committed_batch(spark, marker.table, marker.txn_app_id) == 2
    recorded = recent_results(spark, spec.name, 10)
    assert sorted(r["batch_id"] for r in recorded) == [0, 1, 2]
    history = spark.sql(f"DESCRIBE HISTORY {marker.table}")
    appends = history.where(f"version > {before} AND operation = 'WRITE'").count()
    assert appends == 1, "one append for the run's three batches"


def test_outcomes_a_stopped_run_did_not_append_are_read_back_from_the_ledger(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """Batches committed with no outcomes appended (the run stopped first) are recovered."""
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a", "b"]))
    commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, ["b"]))
    outcomes = outcomes_of(spark, spec, "app")

    recovered = recover_outcomes(TableWriter(spark, spec, "app"), outcomes)
    again = recover_outcomes(TableWriter(spark, spec, "app"), outcomes)

    assert [(r.batch_id, r.status, r.failing_keys) for r in recovered] == [
        (0, "passed", 0),
        (1, "failed", 1),
    ]
    assert again == []
    rows = recent_results(spark, spec.name, 10)
    assert sorted((r["batch_id"], r["status"]) for r in rows) == [(0, "passed"), (1, "failed")]
