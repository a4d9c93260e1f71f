"""One lakehouse home, many processes at once: ingests, operators, analysts and the JDBC server.

For over two minutes, each in its own process and JVM: a continuous ingest of pipeline A, a
second continuous ingest into A's table under another app id, available-now runs of pipeline B
into another table, a loop of `lakehouse sql` counts and `lakehouse status`, and `lakehouse
serve` answering JDBC queries. Every command must succeed; every count seen is whole batches and
never decreases; at the end both tables hold exactly the input.
"""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.processes import run_lakehouse
from tests.support.projects import (
    EVENTS,
    Pipeline,
    Table,
    events,
    land,
    start_lakehouse,
    write_project,
)
from tests.support.servers import LakehouseServer, beeline

pytestmark = pytest.mark.slow

ROWS_PER_FILE = 40
SCENARIO_SECONDS = 130
PIPELINES = [
    Pipeline("a", "events-a", path="landing_a"),
    Pipeline("c", "events-c", path="landing_c"),
    Pipeline("b", "orders-b", table="orders", path="landing_b"),
]
ORDERS = Table("orders", "order_id STRING NOT NULL, total DOUBLE", "order_id")


def per_app_counts(cwd: Path) -> dict[str, int]:
    result = run_lakehouse(
        cwd,
        "sql",
        "--format",
        "json",
        "SELECT _lh_app_id AS app, count(*) AS n FROM events GROUP BY _lh_app_id",
    )
    assert result.returncode == 0, result.stderr
    return {row["app"]: int(row["n"]) for row in json.loads(result.stdout)}


def test_ingests_operators_and_analysts_share_one_home(tmp_path: Path) -> None:
    landings = write_project(tmp_path, PIPELINES, (EVENTS, ORDERS))
    expected: dict[str, set[str]] = defaultdict(set)

    def feed(name: str, index: int) -> None:
        ids = [f"{name}{index}-{i}" for i in range(ROWS_PER_FILE)]
        expected[name].update(ids)
        rows = [{"order_id": i, "total": 1.0} for i in ids] if name == "b" else events(ids)
        land(landings[name], f"{index:04d}.json", rows)

    for name in "abc":
        feed(name, 0)
    first_b = run_lakehouse(tmp_path, "ingest", "b")
    assert first_b.returncode == 0, first_b.stderr

    a = start_lakehouse(tmp_path, "ingest", "a", "--trigger", "3 seconds", new_session=True)
    c = start_lakehouse(tmp_path, "ingest", "c", "--trigger", "4 seconds", new_session=True)
    seen: dict[str, int] = {}
    commands = 0
    try:
        with LakehouseServer(tmp_path) as server:
            started = time.monotonic()
            index = 1
            b_runs = []
            while time.monotonic() - started < SCENARIO_SECONDS or index < 4:
                for name in "abc":
                    feed(name, index)
                index += 1
                if index % 2 == 0:
                    b_runs.append(
                        start_lakehouse(
                            tmp_path, "ingest", "b", "--trigger", "available-now", new_session=True
                        )
                    )
                counts = per_app_counts(tmp_path)
                commands += 1
                for app, count in counts.items():
                    assert count % ROWS_PER_FILE == 0, f"part of a batch seen: {counts}"
                    assert count >= seen.get(app, 0), f"count went down: {seen} -> {counts}"
                    seen[app] = count
                status = run_lakehouse(tmp_path, "status", "events", "--format", "json")
                assert status.returncode == 0, status.stderr
                commands += 1
                assert set(json.loads(status.stdout)[0]["apps"]) <= {"events-a", "events-c"}
                jdbc = beeline(server.url, "SELECT count(*) FROM events")
                assert jdbc.returncode == 0, jdbc.stderr[-2000:]
                assert int(jdbc.stdout.split()[-1]) % ROWS_PER_FILE == 0
                commands += 1
                assert a.poll() is None, a.stderr.read() if a.stderr else ""
                assert c.poll() is None, c.stderr.read() if c.stderr else ""
            elapsed = time.monotonic() - started
            assert server.stop() == 0
        for run in b_runs:
            _, err = run.communicate(timeout=600)
            assert run.returncode == 0, err
        files = index
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            counts = per_app_counts(tmp_path)
            if counts.get("events-a") == counts.get("events-c") == files * ROWS_PER_FILE:
                break
            time.sleep(5)
    finally:
        for process in (a, c):
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
    for process in (a, c):
        _, err = process.communicate(timeout=120)
        assert process.returncode in (0, 130), err[-2000:]
        assert "Traceback" not in err
    last_b = run_lakehouse(tmp_path, "ingest", "b")
    assert last_b.returncode == 0, last_b.stderr

    rows = run_lakehouse(
        tmp_path,
        "sql",
        "--format",
        "json",
        "--limit",
        "100000",
        "SELECT _lh_app_id AS app, event_id AS id FROM events "
        "UNION ALL SELECT _lh_app_id AS app, order_id AS id FROM orders",
    )
    assert rows.returncode == 0, rows.stderr
    landed: dict[str, list[str]] = defaultdict(list)
    for row in json.loads(rows.stdout):
        landed[row["app"]].append(row["id"])
    for name, app in (("a", "events-a"), ("c", "events-c"), ("b", "orders-b")):
        assert len(landed[app]) == len(set(landed[app])), f"{app}: duplicates"
        assert set(landed[app]) == expected[name], f"{app}: lost or extra rows"
    assert elapsed >= 120
    print(f"scenario {elapsed:.0f} s, {commands} commands, {index} files per landing")
