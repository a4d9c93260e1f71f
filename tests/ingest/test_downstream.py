"""Downstream exactly once: a stream of the target's change data feed, killed and restarted.

A reader in its own process (`tests.support.downstream`) streams the table's change data feed
into a sink table with a checkpoint, appending each micro-batch with `txnAppId`/`txnVersion`. It
is killed after a write landed and before its checkpoint recorded it, then restarted; meanwhile
the table gets a resend, `check --full --repair`, `replay --replace` and `optimize`. The sink
must end up holding each change of the table exactly once: inserts, the repair's deletes, the
replacement's updates and deletes, and nothing for the optimize.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from tests.support.processes import child_env

pytestmark = [pytest.mark.slow, pytest.mark.downstream]

REPO = Path(__file__).resolve().parents[2]
TABLE = "ds_events"
runner = CliRunner()
CONFIG = """
[lakehouse]
home = "{home}"

[tables.ds_events]
schema = "event_id STRING NOT NULL, amount DOUBLE"
keys = ["event_id"]

[pipelines.ds_landing]
table = "ds_events"
[pipelines.ds_landing.source]
format = "json"
path = "{landing}"
max_files_per_trigger = 1
"""
Change = tuple[int, str, str, int, float]


class Downstream:
    """The downstream reader as a child process, its output lines read by a thread."""

    def __init__(self, home: Path, sink: Path, checkpoint: Path, stall_at: int | None = None):
        argv = [str(home), TABLE, str(sink), str(checkpoint)]
        if stall_at is not None:
            argv.append(str(stall_at))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.downstream", *argv],
            cwd=REPO,
            env={**child_env(), "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, wanted: str, timeout: float) -> None:
        """Wait for an output line equal to `wanted`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, "\n".join(self.seen[-30:])
                continue
            self.seen.append(line)
            if line == wanted:
                return
        raise AssertionError(f"no {wanted!r} line in {timeout} s: " + "\n".join(self.seen[-30:]))

    def kill(self) -> None:
        """SIGKILL: no chance to finish anything."""
        self.proc.kill()
        self.proc.wait(timeout=60)


def changes_of(spark: SparkSession, frame: Any) -> Counter[Change]:
    """Each change as (version, type, key, batch id, amount), counted."""
    rows = frame.select(
        "_commit_version", "_change_type", "event_id", "_lh_batch_id", "amount"
    ).collect()
    return Counter((int(r[0]), str(r[1]), str(r[2]), int(r[3]), float(r[4])) for r in rows)


def land(landing: Path, name: str, rows: list[dict[str, object]]) -> None:
    """Land a file with a modification time of its own, so batches take the files in order."""
    staging = landing / f".{name}.tmp"
    staging.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seconds = time.time() - 3600 + len(list(landing.iterdir())) * 10
    os.utime(staging, (seconds, seconds))
    staging.rename(landing / name)


def lakehouse(config: Path, *args: str) -> str:
    result = runner.invoke(app, [*args, "-c", str(config)])
    assert result.exit_code == 0, f"lakehouse {' '.join(args)}: {result.output}"
    return result.stdout


def test_a_downstream_stream_sees_each_change_once_across_a_kill_repairs_and_replays(
    spark: SparkSession, lakehouse_home: Path, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    config = tmp_path / "lakehouse.toml"
    config.write_text(CONFIG.format(home=tmp_path / "home", landing=landing))
    for n in range(3):
        land(landing, f"{n}.json", [{"event_id": f"e{n}-{i}", "amount": 1.0} for i in range(4)])
    lakehouse(config, "ingest")  # versions 1, 2, 3: batches 0, 1, 2
    sink, checkpoint = tmp_path / "sink", tmp_path / "downstream-checkpoint"

    first = Downstream(lakehouse_home, sink, checkpoint, stall_at=1)
    try:
        first.wait_for("stalled", timeout=600)
    finally:
        first.kill()  # batch 1 is in the sink, not in the checkpoint
    before_restart = changes_of(spark, spark.read.format("delta").load(str(sink)))

    second = Downstream(lakehouse_home, sink, checkpoint)
    try:
        # A resend outside the `batch` dedup scope lands twice; the repair deletes the later
        # copies; the replacement rewrites batch 1 from its file as it is now; optimize
        # rewrites files and changes no row.
        land(landing, "3.json", [{"event_id": k, "amount": 1.0} for k in ("e0-0", "e0-1", "e3-0")])
        lakehouse(config, "ingest")
        lakehouse(config, "check", TABLE, "--full", "--repair", "--yes")
        land_in_place = landing / "1.json"
        land_in_place.write_text(
            "".join(json.dumps({"event_id": f"e1-{i}", "amount": 5.0}) + "\n" for i in range(3))
        )
        lakehouse(
            config,
            "replay",
            TABLE,
            "--app-id",
            "ds_landing",
            "--from-batch",
            "1",
            "--to-batch",
            "1",
            "--replace",
            "--yes",
        )
        # A new batch after the rewrites leaves the table more than one file to compact.
        land(landing, "4.json", [{"event_id": f"e4-{i}", "amount": 1.0} for i in range(2)])
        lakehouse(config, "ingest")
        optimized = lakehouse(config, "optimize", TABLE)
        expected = changes_of(
            spark,
            spark.read.option("readChangeFeed", "true").option("startingVersion", 0).table(TABLE),
        )
        deadline = time.monotonic() + 600
        while True:
            got = changes_of(spark, spark.read.format("delta").load(str(sink)))
            if got == expected or time.monotonic() > deadline:
                break
            time.sleep(2)
    finally:
        second.kill()

    assert got == expected
    assert set(got.values()) == {1}
    assert 0 < sum(before_restart.values()) < sum(got.values())
    operations = [
        (int(r["version"]), r["operation"])
        for r in spark.sql(f"DESCRIBE HISTORY {TABLE}").collect()
    ]
    history = {operation: version for version, operation in operations}
    assert "OPTIMIZE" in history, (optimized, operations)
    inserted = sorted(key for (_, kind, key, _, _) in got if kind == "insert")
    assert inserted == sorted(
        [f"e{n}-{i}" for n in range(3) for i in range(4)] + ["e0-0", "e0-1", "e3-0", "e4-0", "e4-1"]
    )
    deleted = sorted((key, batch) for (_, kind, key, batch, _) in got if kind == "delete")
    assert deleted == [("e0-0", 3), ("e0-1", 3), ("e1-3", 1)]
    updated = sorted(
        (kind, key, amount) for (_, kind, key, _, amount) in got if kind.startswith("update")
    )
    assert updated == sorted(
        [("update_preimage", f"e1-{i}", 1.0) for i in range(3)]
        + [("update_postimage", f"e1-{i}", 5.0) for i in range(3)]
    )
    assert not [c for c in got if c[0] == history["OPTIMIZE"]]
