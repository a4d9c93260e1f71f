"""`lakehouse ingest` on a terminal draws its backlog as a progress bar (a pty for stderr)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import child_env
from tests.support.projects import Pipeline, events, land, write_project

pytestmark = pytest.mark.slow
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_a_terminal(cwd: Path, *args: str, timeout: float = 600) -> tuple[int, str, str]:
    """Run `lakehouse ARGS` with stderr on a pseudo-terminal; exit code, stdout, terminal text."""
    master, slave = pty.openpty()
    env = {**child_env(), "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    process = subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    os.close(master)
    out, _ = process.communicate(timeout=60)
    return process.returncode, out, seen.decode(errors="replace")


def test_an_available_now_ingest_shows_files_done_against_pending(tmp_path: Path) -> None:
    landing = write_project(tmp_path, [Pipeline("events", "events-landing")])["events"]
    for n in range(3):
        land(landing, f"{n}.json", events([f"e{n}-{i}" for i in range(5)]), mtime=1_700_000_000 + n)

    code, out, terminal = run_on_a_terminal(tmp_path, "ingest")

    assert code == 0, terminal
    assert "3 batches (3 committed" in out
    plain = ANSI.sub("", terminal)
    assert "0/3 files" in plain, plain[-2000:]
    assert "3/3 files" in plain, plain[-2000:]
    assert "ingesting events into events" in plain
    assert "batch 2: committed" in plain
