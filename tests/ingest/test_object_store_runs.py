"""Exactly once on S3: the runs of tests/ingest/test_exactly_once.py, on a local S3-API server.

The tables (`warehouse = "s3a://..."`), the stream checkpoints and the landing zone are all on
s3proxy; each run is a new `lakehouse` process, as a scheduled job is. Runs killed after a commit
and before a checkpoint, then a lost checkpoint met with `reset-app`; two pipelines with distinct
app ids and a delta-rs writer on one table at once: each leaves every record once and a gap-free
ledger (the second checked by `lakehouse verify`, which names only delta-rs's commits). A
second run of a pipeline whose first run holds the checkpoint's lease is refused. Each scenario
is one flow of processes (each costs a JVM start).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.processes import command_lines, run_lakehouse
from tests.support.projects import prime_class_archive, start_lakehouse
from tests.support.s3_server import SECRET_KEY, S3Server, start_s3_server

pytestmark = [pytest.mark.slow, pytest.mark.object_store]

BUCKET = "lake"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with (
        pytest.MonkeyPatch.context() as patch,
        start_s3_server(tmp_path_factory.mktemp("s3")) as server,
    ):
        for name, value in server.credentials().items():
            patch.setenv(name, value)
        server.bucket(BUCKET)
        # The drivers of an S3 project load the S3A JARs: a class path of its own to archive.
        prime_class_archive(
            project(tmp_path_factory.mktemp("prime"), server, "prime"), "sql", "SELECT 1"
        )
        yield server


def project(root: Path, s3: S3Server, prefix: str, apps: tuple[str, ...] = ("a",)) -> Path:
    """A project whose tables, checkpoints and landing zones are under `s3a://lake/<prefix>`;
    the landing zone of app `x` is the directory `landing/x` of the server's bucket."""
    base = f"s3a://{BUCKET}/{prefix}"
    lines = [
        "[lakehouse]",
        'home = ".lakehouse"',
        f'warehouse = "{base}/tables"',
        "",
        s3.storage_toml(),
        "[tables.events]",
        'schema = "event_id STRING NOT NULL, amount DOUBLE"',
        'keys = ["event_id"]',
        "",
    ]
    for app in apps:
        lines += [
            f"[pipelines.{app}]",
            'table = "events"',
            f'app_id = "{app}"',
            f'checkpoint = "{base}/checkpoints/{app}"',
            f"[pipelines.{app}.source]",
            'format = "json"',
            f'path = "{base}/landing/{app}"',
            "max_files_per_trigger = 1",
            "",
        ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "lakehouse.toml").write_text("\n".join(lines))
    return root


def drop(s3: S3Server, prefix: str, app: str, first: int, files: int, per_file: int = 5) -> None:
    """`files` JSON files of `per_file` events each into an app's landing zone on S3, in order."""
    for n in range(files):
        start = first + n * per_file
        rows = [{"event_id": f"{app}-{i}", "amount": 1.0} for i in range(start, start + per_file)]
        text = "".join(json.dumps(row) + "\n" for row in rows)
        s3.put(BUCKET, f"{prefix}/landing/{app}/part-{first + n:05}.json", text.encode())
        time.sleep(1.1)  # S3 times are in seconds: one second apart, the files keep their order


def ok(root: Path, *args: str, fault: str | None = None) -> str:
    done = run_lakehouse(root, *args, fault=fault)
    assert done.returncode == 0, f"lakehouse {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


def killed(root: Path, fault: str) -> None:
    done = run_lakehouse(root, "ingest", "a", fault=fault)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]


def landed(root: Path) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Each key's copies in `events` and each app's ledger batches, in one `lakehouse sql`."""
    rows = json.loads(
        ok(
            root,
            *("sql", "--format", "json", "--limit", "100000"),
            "SELECT 'key' AS what, event_id AS name, count(*) AS n FROM events GROUP BY event_id "
            "UNION ALL SELECT 'batch', concat(app_id, ':', batch_id), count(*) FROM events_ledger "
            "WHERE kind = 'batch' GROUP BY app_id, batch_id",
        )
    )
    keys = {r["name"]: int(r["n"]) for r in rows if r["what"] == "key"}
    batches: dict[str, list[int]] = {}
    for r in rows:
        if r["what"] == "batch":
            app, batch = r["name"].rsplit(":", 1)
            batches.setdefault(app, []).extend([int(batch)] * int(r["n"]))
    return keys, {app: sorted(ids) for app, ids in batches.items()}


def test_killed_runs_then_a_lost_checkpoint_on_s3_land_each_record_once(
    tmp_path: Path, s3: S3Server
) -> None:
    root = project(tmp_path / "p", s3, "killed")
    drop(s3, "killed", "a", 0, 4)

    killed(root, "after_commit:kill@1")
    # committed and audited, the stream checkpoint not written: the restart meets batch 2 again
    killed(root, "before_audit:kill@2")
    ok(root, "ingest", "a")
    commits = [
        k for k in s3.objects(BUCKET, "killed/tables/events/_delta_log") if k.endswith(".json")
    ]
    assert len(commits) >= 5  # the table's creation and four batches, each a conditional PUT

    shutil.rmtree(s3.root / "data" / BUCKET / "killed" / "checkpoints" / "a")
    refused = run_lakehouse(root, "ingest", "a")
    assert refused.returncode == 1
    assert "checkpoint" in refused.stderr
    ok(root, "reset-app", "events", "--app-id", "a", "--to-batch", "-1", "--yes")
    ok(root, "ingest", "a")  # a fresh checkpoint: the four files again, as batches 0-3 again

    keys, batches = landed(root)  # the ledger view reads the log on S3: inside the warehouse
    assert keys == {f"a-{i}": 1 for i in range(20)}
    # each batch once before the reset, once after it
    assert batches == {"a": [0, 0, 1, 1, 2, 2, 3, 3]}
    # `verify` reading this log on S3: the two-app-id scenario below (its one kind of finding)
    # the same bucket outside the warehouse is no place for an analyst's query, however named
    outside = "s3a://lake/killed/tables/../landing/a"
    refused = run_lakehouse(root, "sql", f"SELECT count(*) FROM json.`{outside}`")
    assert refused.returncode == 1
    assert "outside the lakehouse home" in refused.stderr


def test_two_app_ids_and_delta_rs_writing_one_s3_table_at_once_each_land_once(
    tmp_path: Path, s3: S3Server
) -> None:
    """Two pipelines ingest while delta-rs appends (put-if-absent commits, its S3 default):
    no commit is lost or overwritten, whichever engine wrote it."""
    root = project(tmp_path / "p", s3, "two", apps=("a", "b"))
    drop(s3, "two", "a", 0, 4)
    drop(s3, "two", "b", 0, 4)
    log = "two/tables/events/_delta_log"
    runs = [start_lakehouse(root, "ingest", app) for app in ("a", "b")]
    deadline = time.monotonic() + 300
    while f"{log}/00000000000000000000.json" not in s3.objects(BUCKET, log):
        assert all(run.poll() is None for run in runs), "a run ended before the table was created"
        assert time.monotonic() < deadline, "the table was never created"
        time.sleep(0.2)
    appended = append_with_delta_rs(s3, f"s3://{BUCKET}/two/tables/events", runs)
    for run in runs:
        _, stderr = run.communicate(timeout=900)
        assert run.returncode == 0, stderr[-2000:]

    keys, batches = landed(root)
    expected = {f"{app}-{i}": 1 for app in ("a", "b") for i in range(20)}
    expected |= {f"rs-{n}-{i}": 1 for n in range(appended) for i in range(3)}
    assert keys == expected
    assert batches == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
    versions = [k for k in s3.objects(BUCKET, log) if k.endswith(".json")]
    assert versions == [f"{log}/{v:020}.json" for v in range(len(versions))]  # no gap
    engines = [commit_engine(s3.root / "data" / BUCKET / key) for key in versions]
    assert engines.count("delta-rs") == appended  # every append is its own version: none lost
    assert engines.count("spark") >= 9  # the creation and the eight batches
    # verify's one complaint: each delta-rs append changed the table without a ledger entry
    verified = run_lakehouse(root, "verify", "events", "-f", "json")
    findings = json.loads(verified.stdout)
    assert [f["finding"] for f in findings] == ["outside_ledger"] * appended, verified.stdout


def append_with_delta_rs(s3: S3Server, table: str, runs: list[subprocess.Popen[str]]) -> int:
    """Append 3-row batches with delta-rs, one a second while any run goes on (6 to 12 of them);
    how many. (Back to back, hundreds of them crowd out the pipelines on two cores.)"""
    options = s3.delta_rs_options()
    schema = pa.schema(DeltaTable(table, storage_options=options).schema().to_arrow())
    appended = 0
    while (any(run.poll() is None for run in runs) and appended < 12) or appended < 6:
        time.sleep(1.0)
        keys = [f"rs-{appended}-{i}" for i in range(3)]
        columns = {f.name: pa.nulls(len(keys), f.type) for f in schema}
        columns["event_id"] = pa.array(keys, pa.string())
        columns["amount"] = pa.array([2.0] * len(keys))
        # the lineage a delta-rs writer gives its rows: its own app id, its append's number
        columns["_lh_app_id"] = pa.array(["delta-rs"] * len(keys), pa.string())
        columns["_lh_batch_id"] = pa.array(
            [appended] * len(keys), schema.field("_lh_batch_id").type
        )
        columns["_lh_ingested_at"] = pa.array(
            [datetime.now(UTC)] * len(keys), schema.field("_lh_ingested_at").type
        )
        batch = pa.Table.from_pydict(columns, schema=schema)
        write_deltalake(table, batch, mode="append", storage_options=options)
        appended += 1
    return appended


def commit_engine(path: Path) -> str:
    """Which engine wrote a commit file: delta-rs records `clientVersion`, Spark `engineInfo`."""
    for line in path.read_text().splitlines():
        info = json.loads(line).get("commitInfo")
        if info is not None:
            return "delta-rs" if "delta-rs" in info.get("clientVersion", "") else "spark"
    return "unknown"


def test_a_second_run_of_a_pipeline_on_s3_is_refused_while_the_first_holds_its_lease(
    tmp_path: Path, s3: S3Server
) -> None:
    """The first run stalls (SIGSTOP) right after its first commit, holding the lease."""
    root = project(tmp_path / "p", s3, "lease")
    drop(s3, "lease", "a", 0, 2)
    # a lease that outlasts the second run's start, however slow the machine
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_CHECKPOINT_LEASE_SECONDS", "900")
        first = start_lakehouse(root, "ingest", "a", new_session=True, fault="after_commit:stall@0")
    lease = s3.root / "data" / BUCKET / "lease" / "checkpoints" / "a" / ".lakehouse.lease"
    deadline = time.monotonic() + 300
    while not is_stopped(first.pid) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert is_stopped(first.pid), "the first run did not stall after its commit"
        assert lease.exists(), "the first run holds no lease"
        # Any local user reads command lines: the S3 keys reach the JVM in its environment.
        assert [line for line in command_lines() if SECRET_KEY in line] == []
        second = run_lakehouse(root, "ingest", "a")
        assert second.returncode == 75  # transient: the lease ends with the run, or expires
        assert "in use by another run" in second.stderr
    finally:
        os.killpg(first.pid, signal.SIGCONT)
        _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr[-2000:]
    assert not lease.exists()  # released at the end of the run
    assert landed(root) == ({f"a-{i}": 1 for i in range(10)}, {"a": [0, 1]})


def is_stopped(pid: int) -> bool:
    """True if process `pid` is stopped (state `T`: a SIGSTOP'd stall)."""
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "T"
