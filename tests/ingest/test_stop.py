"""Ctrl-C and SIGTERM stop a continuous `lakehouse ingest` between batches (finding 9).

Each run is a real child process with its own JVM, signalled as a terminal or a supervisor
would: after a batch has committed. It must finish that batch, print one line, exit 130
(SIGINT) or 143 (SIGTERM) with no traceback, and the next run must go on from there: a run
stopped by Ctrl-C, then one stopped by SIGTERM, then one to the end land every row exactly once.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.processes import run_lakehouse
from tests.support.projects import (
    Pipeline,
    copies_on_disk,
    events,
    land,
    start_lakehouse,
    write_project,
)

pytestmark = pytest.mark.slow

FILES = 6
ROWS_PER_FILE = 25


def project(root: Path) -> set[str]:
    """A config and FILES landing files, one per micro-batch; the ids they hold."""
    landing = write_project(root, [Pipeline("events", "events-landing")])["events"]
    ids: set[str] = set()
    for n in range(FILES):
        batch = [f"e{n}-{i}" for i in range(ROWS_PER_FILE)]
        ids.update(batch)
        land(landing, f"{n}.json", events(batch), mtime=1_700_000_000 + n)
    return ids


def signalled_run(root: Path, signum: int, timeout: float = 600) -> tuple[int, str, str]:
    """Start a continuous ingest, send `signum` once a batch committed; exit code and output."""
    child = start_lakehouse(root, "ingest", "--trigger", "2 seconds")
    assert child.stderr is not None
    assert child.stdout is not None
    lines: list[str] = []
    out: list[str] = []
    committed = threading.Event()

    def read_stderr() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            lines.append(line)
            if line.startswith("batch ") and ": committed" in line:
                committed.set()

    def read_stdout() -> None:
        assert child.stdout is not None
        out.extend(child.stdout)

    readers = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
    for reader in readers:
        reader.start()
    try:
        assert committed.wait(timeout), "".join(lines)
        child.send_signal(signum)
        child.wait(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
    for reader in readers:
        reader.join(timeout=30)
    return child.returncode, "".join(out), "".join(lines)


def landed_once(spark: SparkSession, root: Path, ids: set[str]) -> None:
    """Run available-now to the end, then check that every id is in the table exactly once."""
    finished = run_lakehouse(root, "ingest")
    assert finished.returncode == 0, finished.stderr
    landed = copies_on_disk(spark, root)
    assert set(landed) == ids
    assert set(landed.values()) == {1}


def assert_no_temp_files(root: Path) -> None:
    """A stopped run leaves its checkpoint clean: no temp file of an entry Spark was writing."""
    checkpoint = root / ".lakehouse" / "checkpoints" / "events-landing"
    left = [p.name for p in checkpoint.rglob("*") if p.name.endswith((".tmp", ".tmp.crc"))]
    assert left == []


def assert_stopped_by(signum: int, code: int, result: tuple[int, str, str]) -> None:
    """The run exited with `code`, and said once, with no traceback, which signal stopped it."""
    returncode, stdout, stderr = result
    assert returncode == code, stderr
    other = [line for line in stderr.splitlines() if not line.startswith("batch ")]
    name = signal.Signals(signum).name
    assert len(other) == 1, stderr
    assert other[0].startswith(f"events: stopped by {name} between batches, after batch ")
    assert "Traceback" not in stdout + stderr
    assert "py4j" not in (stdout + stderr).lower()
    assert "events: " in stdout


def test_a_signal_stops_between_batches_and_the_next_run_goes_on_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    ids = project(tmp_path)
    started = time.monotonic()
    assert_stopped_by(signal.SIGINT, 130, signalled_run(tmp_path, signal.SIGINT))
    assert_no_temp_files(tmp_path)
    assert_stopped_by(signal.SIGTERM, 143, signalled_run(tmp_path, signal.SIGTERM))
    assert_no_temp_files(tmp_path)
    assert time.monotonic() - started < 900
    landed_once(spark, tmp_path, ids)
