"""What `lakehouse ingest` records while it runs: the batch log and metrics scraped over HTTP."""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from tests.support.servers import free_port

runner = CliRunner()

CONFIG = """
[lakehouse]
home = "{home}"

[tables.obs_events]
schema = "event_id STRING NOT NULL, amount DOUBLE"
keys = ["event_id"]

[pipelines.obs_landing]
table = "obs_events"
[pipelines.obs_landing.source]
format = "json"
path = "{landing}"
max_files_per_trigger = 1
"""
COMMITTED = re.compile(
    r'lakehouse_batches_total\{app_id="obs_landing",status="committed",table="obs_events"\} (\S+)'
)
INSERTED = re.compile(
    r'lakehouse_rows_total\{app_id="obs_landing",fate="inserted",table="obs_events"\} (\S+)'
)


def scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, ConnectionError):
        return None


def test_ingest_logs_each_batch_and_serves_metrics_while_it_runs(
    spark: SparkSession, tmp_path: Path
) -> None:
    home, landing = tmp_path / "home", tmp_path / "landing"
    landing.mkdir()
    config = tmp_path / "lakehouse.toml"
    config.write_text(CONFIG.format(home=home, landing=landing))
    landed_at = time.time() - 120
    for n in range(3):
        rows = [{"event_id": f"e{n}-{i}", "amount": 1.0} for i in range(4)] + [{"amount": 2.0}]
        (landing / f"{n}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(landing / f"{n}.json", (landed_at + n, landed_at + n))
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    scrapes: list[str] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            text = scrape(url)
            if text is not None:
                scrapes.append(text)
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        result = runner.invoke(app, ["ingest", "-c", str(config), "--metrics-port", str(port)])
    finally:
        done.set()
        poller.join()

    assert result.exit_code == 0, result.output
    # stderr is no terminal here: the metrics' address and one line per batch, nothing more.
    lines = result.stderr.splitlines()
    assert lines[0] == f"metrics at {url}"
    assert [line.split(":")[0] for line in lines[1:]] == ["batch 0", "batch 1", "batch 2"]
    assert all("committed (read 5, inserted 4," in line for line in lines[1:])

    during = [s for s in scrapes if (m := COMMITTED.search(s)) and float(m.group(1)) >= 1]
    assert during, f"no scrape saw a committed batch ({len(scrapes)} scrapes)"
    inserted = INSERTED.search(during[-1])
    assert inserted is not None
    assert float(inserted.group(1)) >= 4
    assert 'lakehouse_last_committed_batch{app_id="obs_landing",table="obs_events"}' in during[-1]
    assert scrape(url) is None  # the server stopped with the run

    logged = [
        json.loads(line) for line in (home / "logs" / "batches.jsonl").read_text().splitlines()
    ]
    assert [(r["batch_id"], r["status"]) for r in logged] == [
        (0, "committed"),
        (1, "committed"),
        (2, "committed"),
    ]
    for record in logged:
        assert record["rows"]["read"] == 5
        assert record["rows"]["inserted"] == 4
        assert record["rows"]["quarantined"] == 1
        assert {"prepare", "audit", "quarantine", "write", "commit", "audit_settle"} <= set(
            record["seconds"]
        )
        assert {"outcomes_append", "batch"} <= set(record["seconds"])
        assert record["seconds"]["batch"] >= record["seconds"]["commit"]
        assert record["bytes"] == (landing / f"{record['batch_id']}.json").stat().st_size
        assert record["lag_seconds"] >= 100
        assert record["source"] == {"unit": "files", "count": 1}
    # The run's last append of outcomes is at its end, not in a batch: none is due before.
    assert [r["seconds"]["outcomes_append"] for r in logged] == [0.0, 0.0, 0.0]


def test_a_busy_metrics_port_is_one_line(spark: SparkSession, tmp_path: Path) -> None:
    import socket

    (tmp_path / "landing").mkdir()
    config = tmp_path / "lakehouse.toml"
    config.write_text(CONFIG.format(home=tmp_path / "home", landing=tmp_path / "landing"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(app, ["ingest", "-c", str(config), "--metrics-port", str(port)])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(
        f"error: --metrics-port {port}: cannot listen on 127.0.0.1:{port}"
    )
