"""One lakehouse home, many processes at once: ingests, operators, analysts and the JDBC server.

For a minute or more (until each command below has run at least once), each in its own process
and JVM: a continuous ingest of pipeline A, a second continuous ingest into A's table under
another app id (C), available-now runs of pipeline B into another table one after another with
`optimize` between them, a loop of counts (`lakehouse sql` and `lakehouse status` taking
turns, and JDBC through `lakehouse serve` every turn), and the read and admin commands
`history`, `quality`, `apps`, `vacuum --dry-run` and `check --full` beside the writers.

Every command must succeed. The counts are read one after another, so for every app of both
tables, whoever reads them: a count is whole batches, never goes down, holds every batch its
driver had reported committed before the read, and no more rows than have landed. At the end
both tables hold exactly the input.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.support.processes import run_lakehouse
from tests.support.projects import (
    EVENTS,
    Pipeline,
    Table,
    events,
    land,
    start_lakehouse,
    table_location,
    write_project,
)
from tests.support.servers import LakehouseServer, beeline

pytestmark = pytest.mark.slow

ROWS_PER_FILE = 40
SCENARIO_SECONDS = 60
MIN_B_RUNS = 2
ADMINS_PER_ITERATION = 2
PIPELINES = [
    Pipeline("a", "events-a", path="landing_a"),
    Pipeline("c", "events-c", path="landing_c"),
    Pipeline("b", "orders-b", table="orders", path="landing_b"),
]
ORDERS = Table("orders", "order_id STRING NOT NULL, total DOUBLE", "order_id")
APP_OF = {"a": "events-a", "c": "events-c", "b": "orders-b"}
EVENT_APPS = {"events-a", "events-c"}
PER_APP = (
    "SELECT _lh_app_id AS app, count(*) AS n FROM (SELECT _lh_app_id FROM events "
    "UNION ALL SELECT _lh_app_id FROM orders) GROUP BY _lh_app_id"
)


def committed(log: Path) -> int:
    """How many `batch N: committed` lines a driver has printed so far (after each commit)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return len(re.findall(r"^batch \d+: committed", text, re.MULTILINE))


class Readings:
    """Every count read in the scenario, in the order read, whoever read it."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = dict.fromkeys(APP_OF.values(), 0)
        self.seen_events_total = 0
        self.calls: Counter[str] = Counter()
        self.beeline_totals: list[int] = []

    def per_app(
        self, reader: str, counts: dict[str, int], floor: dict[str, int], landed: dict[str, int]
    ) -> None:
        """Counts per app id of both tables, read after `floor` rows had been reported."""
        self.calls[reader] += 1
        assert set(counts) <= set(APP_OF.values()), f"{reader}: {counts}"
        for app in APP_OF.values():
            count = counts.get(app, 0)
            assert count % ROWS_PER_FILE == 0, f"{reader}: part of a batch of {app}: {counts}"
            assert count >= self.seen[app], f"{reader}: {app} went down: {self.seen} -> {counts}"
            assert count >= floor[app], f"{reader}: stale {app}: {counts}, committed {floor}"
            assert count <= landed[app], f"{reader}: {app} above what landed: {counts} {landed}"
            self.seen[app] = count
        total = sum(counts.get(app, 0) for app in EVENT_APPS)
        assert total >= self.seen_events_total, f"{reader}: events went down: {counts}"
        self.seen_events_total = total
        if reader == "beeline":
            self.beeline_totals.append(total)

    def events_total(self, reader: str, total: int, floor: dict[str, int]) -> None:
        """The row count of `events` (both app ids), as `status` reports it."""
        self.calls[reader] += 1
        assert total % ROWS_PER_FILE == 0, f"{reader}: part of a batch: {total}"
        assert total >= self.seen_events_total, f"{reader}: went down to {total}: {self.seen}"
        assert total >= sum(floor[app] for app in EVENT_APPS), f"{reader}: stale {total} {floor}"
        self.seen_events_total = total


def succeeded(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `lakehouse ARGS`; it must exit 0."""
    result = run_lakehouse(cwd, *args)
    assert result.returncode == 0, f"lakehouse {' '.join(args)}: {result.stderr[-3000:]}"
    return result


def json_rows(stdout: str) -> list[dict[str, Any]]:
    rows = json.loads(stdout)
    assert isinstance(rows, list)
    assert rows, stdout
    return rows


def vacuum_dry_run(stdout: str) -> None:
    last = stdout.splitlines()[-1]
    assert re.fullmatch(r"events: would remove \d+ path\(s\), \d+ bytes \(retention \d+ h\)", last)


def history(stdout: str) -> None:
    rows = json_rows(stdout)
    assert {row["app_id"] for row in rows} <= EVENT_APPS, rows
    assert {row["kind"] for row in rows} == {"batch"}
    assert all(row["rows_inserted"] == ROWS_PER_FILE for row in rows), rows


def quality(stdout: str) -> None:
    rows = json_rows(stdout)
    assert {row["table_name"] for row in rows} == {"events"}, rows
    assert {row["status"] for row in rows} == {"passed"}, rows


def apps(stdout: str) -> None:
    rows = json_rows(stdout)
    assert {row["app_id"] for row in rows} <= EVENT_APPS, rows
    assert all(row["last_batch"] >= 0 for row in rows), rows


def full_check(stdout: str) -> None:
    [row] = json_rows(stdout)
    assert (row["status"], row["failing_keys"]) == ("passed", 0), row


#: Read and admin commands beside the writers, two per loop iteration (so the five need three
#: iterations' `sql`/`status` and beeline JVMs, not five), running while that iteration's counts
#: are read; their output is checked at the iteration's end.
BESIDE_WRITERS: list[tuple[str, list[str], Callable[[str], None]]] = [
    ("vacuum --dry-run", ["vacuum", "events", "--dry-run"], vacuum_dry_run),
    ("history", ["history", "events", "--format", "json", "--limit", "50"], history),
    ("quality", ["quality", "events", "--format", "json", "--limit", "50"], quality),
    ("apps", ["apps", "events", "--format", "json"], apps),
    ("check --full", ["check", "events", "--full", "--format", "json"], full_check),
]


def test_ingests_operators_and_analysts_share_one_home(spark: SparkSession, tmp_path: Path) -> None:
    landings = write_project(tmp_path, PIPELINES, (EVENTS, ORDERS))
    expected: dict[str, set[str]] = defaultdict(set)
    files: Counter[str] = Counter()

    def feed(name: str) -> None:
        ids = [f"{name}{files[name]}-{i}" for i in range(ROWS_PER_FILE)]
        expected[name].update(ids)
        rows = [{"order_id": i, "total": 1.0} for i in ids] if name == "b" else events(ids)
        land(landings[name], f"{files[name]:04d}.json", rows)
        files[name] += 1

    def landed() -> dict[str, int]:
        return {APP_OF[name]: ROWS_PER_FILE * files[name] for name in APP_OF}

    logs = {name: tmp_path / f"ingest-{name}.log" for name in "ac"}
    b_logs: list[Path] = []

    def start_b() -> subprocess.Popen[str]:
        b_logs.append(tmp_path / f"ingest-b-{len(b_logs)}.log")
        return start_lakehouse(
            tmp_path, "ingest", "b", "--trigger", "available-now", new_session=True, log=b_logs[-1]
        )

    def floor() -> dict[str, int]:
        """Rows each app had reported committed: a read that starts now must see them."""
        reported = {APP_OF[name]: committed(log) for name, log in logs.items()}
        reported["orders-b"] = sum(committed(log) for log in b_logs)
        return {app: ROWS_PER_FILE * n for app, n in reported.items()}

    for name in "abc":
        feed(name)
    b_run = start_b()
    assert b_run.wait(600) == 0, b_logs[-1].read_text()[-3000:]
    b_started = 0

    a = start_lakehouse(
        tmp_path, "ingest", "a", "--trigger", "3 seconds", new_session=True, log=logs["a"]
    )
    c = start_lakehouse(
        tmp_path, "ingest", "c", "--trigger", "4 seconds", new_session=True, log=logs["c"]
    )
    readings = Readings()
    beside = list(BESIDE_WRITERS)
    admins: list[tuple[str, list[str], Callable[[str], None], subprocess.Popen[str]]] = []
    try:
        deadline = time.monotonic() + 600
        while committed(logs["a"]) + committed(logs["c"]) == 0:
            assert time.monotonic() < deadline, "no commit into events in 600 s"
            assert a.poll() is None, logs["a"].read_text()[-3000:]
            time.sleep(1)
        with LakehouseServer(tmp_path) as server:
            started = time.monotonic()
            iteration = 0
            while time.monotonic() - started < SCENARIO_SECONDS or beside or b_started < MIN_B_RUNS:
                for name in "abc":
                    feed(name)
                if b_run.poll() is not None:
                    assert b_run.returncode == 0, b_logs[-1].read_text()[-3000:]
                    optimized = succeeded(tmp_path, "optimize", "orders").stdout.splitlines()[-1]
                    assert re.fullmatch(
                        r"orders: \d+ files before, \d+ after \(\d+ removed, \d+ added\)",
                        optimized,
                    )
                    readings.calls["optimize"] += 1
                    b_run = start_b()
                    b_started += 1

                for what, admin_args, validate in beside[:ADMINS_PER_ITERATION]:
                    admin = start_lakehouse(tmp_path, *admin_args, new_session=True)
                    admins.append((what, admin_args, validate, admin))
                del beside[:ADMINS_PER_ITERATION]

                # `sql` and `status` take turns (each reads at least twice): a JVM less a turn.
                reported = floor()
                if iteration % 2 == 0:
                    sql = json.loads(succeeded(tmp_path, "sql", "--format", "json", PER_APP).stdout)
                    counts = {row["app"]: int(row["n"]) for row in sql}
                    readings.per_app("sql", counts, reported, landed())
                else:
                    [status] = json.loads(
                        succeeded(tmp_path, "status", "events", "--format", "json").stdout
                    )
                    assert set(status["apps"]) <= EVENT_APPS, status
                    readings.events_total("status", int(status["rows"]), reported)
                iteration += 1

                reported = floor()
                jdbc = beeline(server, PER_APP)
                assert jdbc.returncode == 0, jdbc.stderr[-3000:]
                # A line may start with beeline's prompt (`0: jdbc:hive2://...> events-a,40`).
                rows = re.findall(r"([\w-]+),(\d+)$", jdbc.stdout, re.MULTILINE)
                readings.per_app("beeline", {k: int(n) for k, n in rows}, reported, landed())

                while admins:  # each leaves the list once it has exited
                    what, admin_args, validate, admin = admins[0]
                    out, err = admin.communicate(timeout=600)
                    admins.pop(0)
                    assert admin.returncode == 0, f"lakehouse {' '.join(admin_args)}: {err}"
                    validate(out)
                    readings.calls[what] += 1
                assert a.poll() is None, logs["a"].read_text()[-3000:]
                assert c.poll() is None, logs["c"].read_text()[-3000:]
            elapsed = time.monotonic() - started
            assert b_run.wait(600) == 0, b_logs[-1].read_text()[-3000:]
            assert server.stop() == 0
        deadline = time.monotonic() + 600
        while committed(logs["a"]) < files["a"] or committed(logs["c"]) < files["c"]:
            assert time.monotonic() < deadline, "A and C did not catch up in 600 s"
            time.sleep(2)
    finally:
        running = [a, c, b_run, *(admin for *_, admin in admins)]
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in running:
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    for name, process in (("a", a), ("c", c)):
        assert process.returncode == 130, logs[name].read_text()[-3000:]
        output = logs[name].read_text()
        assert "stopped by SIGINT between batches" in output.splitlines()[-1], output[-3000:]
        assert "Traceback" not in output
    succeeded(tmp_path, "ingest", "b")

    # Every row, read by path in this session: the analysts' queries by name were read above.
    landed_ids: dict[str, list[str]] = defaultdict(list)
    for table, key in (("events", "event_id"), ("orders", "order_id")):
        frame = spark.read.format("delta").load(table_location(tmp_path, table))
        for row in frame.select("_lh_app_id", key).collect():
            landed_ids[row["_lh_app_id"]].append(row[key])
    for name, app in APP_OF.items():
        assert len(landed_ids[app]) == len(set(landed_ids[app])), f"{app}: duplicates"
        assert set(landed_ids[app]) == expected[name], f"{app}: lost or extra rows"
    totals = readings.beeline_totals
    assert max(totals) > 0, f"beeline never saw a row of events: {totals}"
    assert totals[-1] > totals[0], f"beeline's count of events did not grow: {totals}"
    assert elapsed >= SCENARIO_SECONDS
    calls = ", ".join(f"{n} {what}" for what, n in readings.calls.items())
    print(
        f"scenario {elapsed:.0f} s of concurrent activity: {calls} call(s); "
        f"{b_started} B runs started during it; {files['a']} files per landing; "
        f"beeline totals of events {totals}"
    )
