"""What a run records about its batches, decided without Spark: timings, facts, lines, metrics."""

from __future__ import annotations

import json
import os
from pathlib import Path

from prometheus_client import generate_latest

from ingest.commit.batch_result import BatchResult
from ingest.observe.batch_log import BatchLog, batch_record
from ingest.observe.facts import lag_seconds, source_facts, source_units
from ingest.observe.metrics import BatchMetrics
from ingest.observe.progress import advance_by
from ingest.sources.backlog import files_pending, normal_path, offsets_pending

KAFKA = {"kind": "kafka", "offsets": {"t": {"0": [0, 9], "1": [5, 5]}}}


def committed(**fields: object) -> BatchResult:
    values: dict[str, object] = {
        "table": "events",
        "app_id": "landing",
        "batch_id": 3,
        "status": "committed",
        "rows_read": 10,
        "rows_inserted": 6,
        "rows_already_present": 1,
        "rows_duplicate_in_batch": 2,
        "rows_quarantined": 1,
        "version": 7,
        "timings": {"commit": 1.5, "batch": 2.0},
        **fields,
    }
    return BatchResult(**values)  # type: ignore[arg-type]


def test_source_units_count_files_or_offsets() -> None:
    assert source_units({"kind": "files", "files": ["a", "b"]}) == ("files", 2)
    assert source_units(KAFKA) == ("offsets", 11)
    assert source_units({}) == ("files", 0)


def test_lag_is_never_negative_and_unknown_without_a_file_time() -> None:
    assert lag_seconds(100.0, 40.0) == 60.0
    assert lag_seconds(100.0, 140.0) == 0.0
    assert lag_seconds(100.0, None) is None


def test_file_facts_come_from_the_files_and_kafka_has_no_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("12345")
    second.write_text("123")
    os.utime(first, (1_000, 1_000))
    os.utime(second, (2_000, 2_000))
    facts = source_facts(None, {"files": [f"file://{first}", str(second)]})
    gone = source_facts(None, {"files": [str(tmp_path / "gone.json")]})
    kafka = source_facts(None, KAFKA)
    assert (facts.count, facts.bytes, facts.newest_modified) == (2, 8, 2_000)
    assert (gone.count, gone.bytes, gone.newest_modified) == (1, None, None)
    assert (kafka.unit, kafka.count, kafka.bytes) == ("offsets", 11, None)


def test_a_batch_line_holds_rows_stages_bytes_and_lag(tmp_path: Path) -> None:
    landed = tmp_path / "a.json"
    landed.write_text("{}\n")
    os.utime(landed, (1_000, 1_000))
    result = committed(source={"kind": "files", "files": [str(landed)]})
    record = batch_record(
        "events", "landing", 3, result, source_facts(None, result.source), now=1_030.0
    )
    assert record["status"] == "committed"
    assert record["version"] == 7
    assert record["rows"] == {
        "read": 10,
        "inserted": 6,
        "already_present": 1,
        "updated": 0,
        "deleted": 0,
        "ignored_older": 0,
        "after_horizon": 0,
        "duplicate_in_batch": 2,
        "quarantined": 1,
    }
    assert record["seconds"] == {"batch": 2.0, "commit": 1.5}
    assert (record["bytes"], record["lag_seconds"]) == (3, 30.0)
    assert record["source"] == {"unit": "files", "count": 1}


def test_a_failed_batch_line_names_the_error() -> None:
    record = batch_record("events", "landing", 4, None, None, 0.0, RuntimeError("disk\nfull"))
    assert record["status"] == "failed"
    assert record["error"] == "RuntimeError: disk"
    assert "rows" not in record


def test_the_batch_log_appends_one_line_per_batch(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "batches.jsonl"
    log = BatchLog(path, "events", "landing", clock=lambda: 0.0)
    log.settled(committed())
    log.failed(4, RuntimeError("x"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["batch_id"], line["status"]) for line in lines] == [
        (3, "committed"),
        (4, "failed"),
    ]


def test_a_rotated_batch_log_is_never_written_again(tmp_path: Path) -> None:
    """Each line opens the file by name: logrotate's rename (no copytruncate) loses no line."""
    path = tmp_path / "logs" / "batches.jsonl"
    log = BatchLog(path, "events", "landing", clock=lambda: 0.0)
    log.settled(committed())
    path.rename(path.with_suffix(".jsonl.1"))

    log.settled(committed(batch_id=4))

    assert [json.loads(line)["batch_id"] for line in path.read_text().splitlines()] == [4]
    rotated = path.with_suffix(".jsonl.1").read_text().splitlines()
    assert [json.loads(line)["batch_id"] for line in rotated] == [3]


def test_a_batch_log_that_cannot_be_written_warns_once_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the directory should be")
    warnings: list[str] = []
    log = BatchLog(blocker / "batches.jsonl", "events", "landing", warn=warnings.append)
    log.settled(committed())
    log.settled(committed(batch_id=4))
    assert len(warnings) == 1
    assert warnings[0].startswith(f"batch log {blocker / 'batches.jsonl'}: cannot append")


def test_metrics_count_batches_rows_and_the_last_batch() -> None:
    metrics = BatchMetrics("events", "landing")
    metrics.start(2, 5)
    metrics.settled(committed())
    metrics.settled(committed(status="skipped", batch_id=3))
    metrics.failed(4, RuntimeError("x"))
    text = generate_latest(metrics.registry).decode()
    labels = 'app_id="landing",table="events"'
    for line in (
        'lakehouse_batches_total{app_id="landing",status="committed",table="events"} 1.0',
        'lakehouse_batches_total{app_id="landing",status="skipped",table="events"} 1.0',
        'lakehouse_batches_total{app_id="landing",status="failed",table="events"} 1.0',
        'lakehouse_rows_total{app_id="landing",fate="inserted",table="events"} 6.0',
        'lakehouse_rows_total{app_id="landing",fate="quarantined",table="events"} 1.0',
        f"lakehouse_rows_read_total{{{labels}}} 10.0",
        f"lakehouse_last_committed_batch{{{labels}}} 3.0",
        f"lakehouse_quarantine_rows{{{labels}}} 6.0",
        f"lakehouse_batch_duration_seconds_count{{{labels}}} 2.0",
    ):
        assert line in text, line


def test_the_progress_bar_advances_by_what_a_batch_read_and_not_for_a_skip() -> None:
    files = {"kind": "files", "files": ["a", "b", "c"]}
    assert advance_by(committed(source=files)) == 3
    assert advance_by(committed(source=KAFKA)) == 11
    assert advance_by(committed(source=files, status="skipped")) == 0


def test_files_pending_compare_paths_whatever_their_spelling() -> None:
    listed = ["file:/land/a.json", "file:/land/b.json", "file:/land/c%20d.json"]
    recorded = ["file:///land/a.json", "/land/c d.json"]
    assert files_pending(listed, recorded) == 1
    assert normal_path("s3a://bucket/x") == "s3a://bucket/x"


def test_offsets_pending_start_after_the_recorded_ranges() -> None:
    available = {"t": {"0": [0, 15], "1": [0, 6], "2": [3, 8]}}
    recorded = [{"t": {"0": [0, 9]}}, {"t": {"1": [5, 5]}}]
    # partition 0: 10..14, partition 1: 6..5 (none), partition 2: never read, from earliest 3..7
    assert offsets_pending(recorded, available, from_earliest=True) == 5 + 0 + 5
    assert offsets_pending(recorded, available, from_earliest=False) == 5
    assert offsets_pending([], {"t": {"0": [4, 10]}}, from_earliest=True) == 6
