"""Ctrl-C and SIGTERM stop a continuous `lakehouse ingest` between batches (finding 9).

Each run is a real child process with its own JVM, signalled as a terminal or a supervisor
would: after its first batch has committed. It must finish that batch, print one line, exit 130
(SIGINT) or 143 (SIGTERM) with no traceback, and the next run must land every row exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.processes import child_env, run_lakehouse

pytestmark = pytest.mark.slow

CONFIG = """
[lakehouse]
home = ".lakehouse"

[tables.events]
schema = "event_id STRING NOT NULL, amount DOUBLE"
keys = ["event_id"]

[pipelines.events]
table = "events"
app_id = "events-landing"
[pipelines.events.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""
FILES = 4
ROWS_PER_FILE = 25


def project(root: Path) -> set[str]:
    """A config and FILES landing files, one per micro-batch; the ids they hold."""
    (root / "lakehouse.toml").write_text(CONFIG)
    landing = root / "landing"
    landing.mkdir()
    ids: set[str] = set()
    for n in range(FILES):
        batch = [f"e{n}-{i}" for i in range(ROWS_PER_FILE)]
        ids.update(batch)
        (landing / f"{n}.json").write_text(
            "\n".join(json.dumps({"event_id": i, "amount": 1.0}) for i in batch) + "\n"
        )
        os.utime(landing / f"{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    return ids


def signalled_run(root: Path, signum: int, timeout: float = 600) -> tuple[int, str, str]:
    """Start a continuous ingest, send `signum` once batch 0 committed; exit code and output."""
    child = subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", "ingest", "--trigger", "2 seconds"],
        cwd=root,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    assert child.stdout is not None
    lines: list[str] = []
    out: list[str] = []
    committed = threading.Event()

    def read_stderr() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            lines.append(line)
            if line.startswith("batch 0: committed"):
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


def landed_once(root: Path, ids: set[str]) -> None:
    """Run available-now to the end, then check that every id is in the table exactly once."""
    finished = run_lakehouse(root, "ingest")
    assert finished.returncode == 0, finished.stderr
    queried = run_lakehouse(
        root,
        "sql",
        "--format",
        "json",
        "SELECT event_id, count(*) AS copies FROM events GROUP BY event_id",
    )
    assert queried.returncode == 0, queried.stderr
    copies = {r["event_id"]: r["copies"] for r in json.loads(queried.stdout)}
    assert set(copies) == ids
    assert set(copies.values()) == {1}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_between_batches_and_the_next_run_goes_on_once(
    tmp_path: Path, signum: int, code: int
) -> None:
    ids = project(tmp_path)
    started = time.monotonic()

    returncode, stdout, stderr = signalled_run(tmp_path, signum)

    assert returncode == code, stderr
    other = [line for line in stderr.splitlines() if not line.startswith("batch ")]
    name = signal.Signals(signum).name
    assert len(other) == 1, stderr
    assert other[0].startswith(f"events: stopped by {name} between batches, after batch ")
    assert "Traceback" not in stdout + stderr
    assert "py4j" not in (stdout + stderr).lower()
    assert "events: " in stdout
    assert time.monotonic() - started < 600
    landed_once(tmp_path, ids)
