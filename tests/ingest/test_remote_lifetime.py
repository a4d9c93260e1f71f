"""A stream run over `--remote` lives no longer than its client (`ingest.remote_lease`).

The client is killed with SIGKILL mid-stream while files keep landing: the server's worker
refuses the first batch that starts after the lease has lapsed, which ends the query; `status`
shows the run while it lives and whose it was after; a new run goes on exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from ingest.remote_lease import REMOTE_LEASE_SECONDS_ENV
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batches
from tables.delta.table import table_exists
from tests.support.connect import Server, assert_own_process
from tests.support.processes import run_lakehouse
from tests.support.projects import (
    EVENTS,
    Pipeline,
    Table,
    events,
    lakehouse_toml,
    land,
    start_lakehouse,
)

pytestmark = [pytest.mark.slow, pytest.mark.connect]

LEASE_SECONDS = 6
#: The longest one batch of five rows takes in the server, commit and audit, on a busy machine.
BATCH_SECONDS = 20
TABLE = Table("orphaned", EVENTS.schema, EVENTS.key)


@pytest.fixture(scope="module", autouse=True)
def _own_process() -> None:
    assert_own_process()


def project(root: Path, server: Server) -> Path:
    """A project over the server's home (the client finds the serve token there)."""
    toml = lakehouse_toml([Pipeline("orphans", "killed", table=TABLE.name)], (TABLE,))
    (root / "lakehouse.toml").write_text(toml.replace('".lakehouse"', json.dumps(str(server.home))))
    (root / "landing").mkdir()
    return root / "landing"


def wait_until(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(1)
    pytest.fail(f"{what} within {seconds:.0f} s")


def test_a_killed_remote_clients_stream_starts_no_batch_after_its_lease(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REMOTE_LEASE_SECONDS_ENV, str(LEASE_SECONDS))
    landing = project(tmp_path, server)
    spark = server.session()
    landed = 0

    def drop() -> None:
        nonlocal landed
        land(landing, f"{landed}.json", events([f"e{landed}-{i}" for i in range(5)]))
        landed += 1

    drop()
    client = start_lakehouse(
        tmp_path,
        "--remote",
        server.url,
        "ingest",
        "orphans",
        "--trigger",
        "2 seconds",
        log=tmp_path / "client.log",
    )
    try:
        wait_until(
            lambda: (
                table_exists(spark, TABLE.name)
                and committed_batches(spark, TABLE.name).get("killed", -1) >= 0
            ),
            300,
            "batch 0 of the remote run did not commit",
        )
        shown = run_lakehouse(
            tmp_path, "--remote", server.url, "status", TABLE.name, "--format", "json"
        )
        drop()
    finally:
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
    killed_at = time.time()
    # Files keep landing, one per trigger: the batch under way when the lease lapsed may still
    # commit (a batch takes seconds here), none after it.
    while time.time() < killed_at + LEASE_SECONDS + BATCH_SECONDS:
        drop()
        time.sleep(2)
    settled = len(read_ledger(spark, TABLE.name, app_id="killed"))
    while time.time() < killed_at + LEASE_SECONDS + 2 * BATCH_SECONDS:
        drop()
        time.sleep(2)
    after = run_lakehouse(
        tmp_path, "--remote", server.url, "status", TABLE.name, "--format", "json"
    )
    entries = read_ledger(spark, TABLE.name, app_id="killed")

    assert shown.returncode == 0, shown.stderr
    running = json.loads(shown.stdout)[0]["streams"]["orphans"]
    assert running.startswith(f"running: pid {client.pid} on "), running
    assert "through Spark Connect session" in running, running
    # The worker refused the first batch that started a lease after the client's last renewal
    # (renewals come every third of a lease): nothing committed later, though files kept coming.
    assert len(entries) == settled, [e.meta.batch_id for e in entries]
    newest = max(e.committed_at.timestamp() for e in entries)
    assert newest <= killed_at + LEASE_SECONDS + BATCH_SECONDS, (newest - killed_at, entries)
    assert after.returncode == 0, after.stderr
    stopped = json.loads(after.stdout)[0]["streams"]["orphans"]
    assert stopped.startswith(f"stopped (last run: pid {client.pid} on "), stopped

    again = run_lakehouse(
        tmp_path, "--remote", server.url, "ingest", "orphans", "--trigger", "available-now"
    )

    assert again.returncode == 0, again.stderr
    # The server's Python workers print their URL with the token: its log has it redacted.
    server_log = (server.home / "logs" / "connect-server.log").read_text(errors="replace")
    assert "Streaming ForeachBatch worker" in server_log
    assert server.process.token not in server_log
    rows = spark.table(TABLE.name).groupBy("event_id").count().collect()
    assert len(rows) == landed * 5
    assert {r["count"] for r in rows} == {1}
