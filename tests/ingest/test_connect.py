"""Exactly once through a Spark Connect server: the commit, the stream, the CLI over --remote.

A local Connect server is started from the pyspark package the way `lakehouse serve` starts it
(`ingest.serve.start_connect_server`: Delta, the warehouse catalog, this interpreter as its
Python workers) and always stopped. The client sessions here have no JVM: every call goes
through public APIs, and the operations with none say so in one line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from ingest.config import PipelineSpec
from ingest.run_report import RunReport
from ingest.runner import run_pipeline
from ingest.sources import FileSource, KafkaSource
from tables.delta.commits import commit_markers
from tables.delta.history import read_ledger
from tables.delta.ledger import admin_metadata
from tables.delta.markers import committed_batches
from tables.delta.provision import ensure_table
from tables.delta.writer import TableWriter
from tables.engine.jvm import is_classic
from tables.engine.serve_token import REMOTE_TOKEN_ENV
from tables.engine.session import connect_session
from tables.errors import (
    BatchContentMismatchError,
    CheckpointLostError,
    ClassicOnlyError,
    UnknownFieldsError,
)
from tables.spec import TableSpec
from tests.support.connect import Server, assert_own_process, connect_server
from tests.support.kafka_broker import KafkaBroker
from tests.support.processes import child_env, run_lakehouse
from tests.support.projects import EVENTS, Pipeline, events, land, write_project

pytestmark = [pytest.mark.slow, pytest.mark.connect]

SCHEMA = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"


@pytest.fixture(scope="module", autouse=True)
def _own_process() -> None:
    assert_own_process()


@pytest.fixture(scope="module")
def remote(server: Server) -> SparkSession:
    session = connect_session(server.url, server.home)
    assert not is_classic(session)
    return session


_names = iter(range(10**6))


def make_table(spark: SparkSession, **kwargs: object) -> TableSpec:
    spec = TableSpec(f"c_{next(_names)}", SCHEMA, ("event_id",), **kwargs)  # type: ignore[arg-type]
    ensure_table(spark, spec)
    return spec


def rows(spark: SparkSession, ids: list[str], amount: float = 1.0) -> DataFrame:
    return spark.createDataFrame(
        [(i, "u", amount) for i in ids], "event_id string, user_id string, amount double"
    )


def keys_of(spark: SparkSession, table: str) -> list[str]:
    return sorted(r["event_id"] for r in spark.table(table).select("event_id").collect())


def test_a_batch_committed_twice_gives_one_copy(remote: SparkSession) -> None:
    spec = make_table(remote)

    first = commit_batch(TableWriter(remote, spec, "app"), 0, rows(remote, ["a", "b"]))
    again = commit_batch(TableWriter(remote, spec, "app"), 0, rows(remote, ["a", "b"]))

    assert (first.status, again.status) == ("committed", "skipped")
    assert keys_of(remote, spec.name) == ["a", "b"]
    assert committed_batches(remote, spec.name) == {"app": 0}
    [entry] = read_ledger(remote, spec.name, app_id="app")
    assert (entry.meta.batch_id, entry.rows_inserted, entry.meta.audit is not None) == (0, 2, True)


def test_an_upsert_table_keeps_the_newest_version_over_connect(remote: SparkSession) -> None:
    spec = make_table(remote, merge="upsert", sequence_by="amount", delete_when="user_id = 'd'")
    versions = "event_id string, user_id string, amount double"

    commit_batch(
        TableWriter(remote, spec, "app"), 0, remote.createDataFrame([("a", "u", 1.0)], versions)
    )
    second = remote.createDataFrame([("a", "u", 3.0), ("a", "d", 2.0), ("b", "u", 1.0)], versions)
    result = commit_batch(TableWriter(remote, spec, "app"), 1, second)
    delete = remote.createDataFrame([("b", "d", 5.0), ("b", "u", 4.0)], versions)
    commit_batch(TableWriter(remote, spec, "app"), 2, delete)
    late = commit_batch(
        TableWriter(remote, spec, "app"), 3, remote.createDataFrame([("b", "u", 4.5)], versions)
    )

    assert (result.rows_updated, result.rows_inserted, result.rows_ignored_older) == (1, 1, 1)
    assert late.rows_ignored_older == 1
    held = remote.table(spec.name).select("event_id", "amount").collect()
    assert [(r["event_id"], r["amount"]) for r in held] == [("a", 3.0)]


def test_a_batch_id_whose_content_changed_is_rejected(remote: SparkSession) -> None:
    spec = make_table(remote)
    commit_batch(TableWriter(remote, spec, "app"), 0, rows(remote, ["a"]))

    with pytest.raises(BatchContentMismatchError, match="arrived again with hash"):
        commit_batch(TableWriter(remote, spec, "app"), 0, rows(remote, ["a"], amount=2.0))

    assert keys_of(remote, spec.name) == ["a"]


def test_two_sessions_committing_at_once_keep_their_markers_apart(server: Server) -> None:
    """Each stream's client session carries its own txn confs (delta-io/delta#3934).

    `table` dedup makes every commit a MERGE, whose txn marker and ledger entry are session
    confs: two sessions of one server committing at once must not see each other's.
    """
    sessions = {"x": server.session(), "y": server.session()}
    spec = make_table(sessions["x"], dedup="table")
    errors: list[BaseException] = []

    def write(app: str) -> None:
        spark = sessions[app]
        try:
            for n in range(4):
                commit_batch(
                    TableWriter(spark, spec, app),
                    n,
                    rows(spark, [f"{app}{n}-{i}" for i in range(3)]),
                )
        except BaseException as exc:  # surfaced below, after both threads end
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(app,)) for app in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    spark = sessions["x"]
    assert errors == []
    assert committed_batches(spark, spec.name) == {"x": 3, "y": 3}
    expected = sorted(f"{a}{n}-{i}" for a in "xy" for n in range(4) for i in range(3))
    assert keys_of(spark, spec.name) == expected
    for entry in read_ledger(spark, spec.name):
        assert entry.rows_inserted == 3, entry
    by_app = {
        app: sorted(e.meta.batch_id for e in read_ledger(spark, spec.name, app_id=app))
        for app in sessions
    }
    assert by_app == {"x": [0, 1, 2, 3], "y": [0, 1, 2, 3]}


def pipeline(root: Path, spec: TableSpec, app_id: str = "landing") -> PipelineSpec:
    return PipelineSpec(
        name=app_id,
        table=spec.name,
        app_id=app_id,
        source=FileSource(str(root / "landing"), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(root / "checkpoints" / app_id),
    )


def test_a_stream_runs_its_batches_in_the_server_and_a_lost_checkpoint_is_detected(
    remote: SparkSession, tmp_path: Path
) -> None:
    spec = make_table(remote)
    landing = tmp_path / "landing"
    landing.mkdir()
    land(landing, "a.json", [{"event_id": f"a{i}", "user_id": "u"} for i in range(5)])
    land(landing, "b.json", [{"event_id": f"b{i}", "user_id": "u"} for i in range(5)], mtime=1)
    job = pipeline(tmp_path, spec)

    report = run_pipeline(remote, job, spec)

    assert [r.status for r in report.results] == ["committed", "committed"]
    assert len(keys_of(remote, spec.name)) == 10
    shutil.rmtree(tmp_path / "checkpoints")
    with pytest.raises(CheckpointLostError, match=r"checkpoint .* is empty"):
        run_pipeline(remote, job, spec)


def test_an_error_in_the_servers_batch_function_comes_back_as_the_same_error(
    remote: SparkSession, tmp_path: Path
) -> None:
    """The worker's `UnknownFieldsError` reaches this process with its class, file and key."""
    spec = make_table(remote, unknown_fields="fail")
    landing = tmp_path / "landing"
    landing.mkdir()
    land(landing, "a.json", [{"event_id": "a1", "user_id": "u", "colour": "red"}])

    with pytest.raises(UnknownFieldsError) as raised:
        run_pipeline(remote, pipeline(tmp_path, spec), spec)

    assert raised.value.file is not None
    assert raised.value.file.endswith("a.json")
    assert raised.value.key == "event_id=a1"
    assert "colour" in str(raised.value)
    assert keys_of(remote, spec.name) == []


def test_two_streams_through_one_server_keep_their_markers_apart(
    server: Server, tmp_path: Path
) -> None:
    """Two pipelines, each in its own client session, stream into one table at once.

    Under `table` dedup every batch is a MERGE whose txn marker and ledger entry are session
    confs of the server-side session its foreachBatch runs in.
    """
    first, second = server.session(), server.session()
    spec = make_table(first, dedup="table")
    jobs = {}
    for app in ("x", "y"):
        root = tmp_path / app
        (root / "landing").mkdir(parents=True)
        for n in range(3):
            keys = [f"{app}{n}-{i}" for i in range(4)]
            land(
                root / "landing",
                f"{n}.json",
                [{"event_id": k, "user_id": "u"} for k in keys],
                mtime=n,
            )
        jobs[app] = pipeline(root, spec, app_id=app)
    reports: dict[str, RunReport] = {}
    errors: list[BaseException] = []

    def stream(app: str, spark: SparkSession) -> None:
        try:
            reports[app] = run_pipeline(spark, jobs[app], spec)
        except BaseException as exc:  # surfaced below, after both threads end
            errors.append(exc)

    threads = [
        threading.Thread(target=stream, args=(app, spark))
        for app, spark in (("x", first), ("y", second))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert {app: [r.status for r in reports[app].results] for app in reports} == {
        "x": ["committed"] * 3,
        "y": ["committed"] * 3,
    }
    assert committed_batches(first, spec.name) == {"x": 2, "y": 2}
    expected = sorted(f"{a}{n}-{i}" for a in "xy" for n in range(3) for i in range(4))
    assert keys_of(first, spec.name) == expected
    by_app = {
        app: sorted(
            (e.meta.batch_id, e.rows_inserted) for e in read_ledger(first, spec.name, app_id=app)
        )
        for app in "xy"
    }
    assert by_app == {app: [(0, 4), (1, 4), (2, 4)] for app in "xy"}


def produce(spark: SparkSession, bootstrap: str, topic: str, ids: list[str]) -> None:
    """Write JSON events to a topic through the Connect server's Kafka connector."""
    values = [(i, f'{{"event_id": "{i}", "user_id": "u", "amount": 1.0}}') for i in ids]
    (
        spark.createDataFrame(values, "key string, value string")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )


def test_a_kafka_stream_runs_through_the_server_exactly_once(
    remote: SparkSession, tmp_path: Path
) -> None:
    """The broker's topic is created by the first write (auto-create) and read by the server."""
    spec = make_table(remote, dedup="table")
    with KafkaBroker(tmp_path / "kafka", config={"auto.create.topics.enable": "true"}) as broker:
        produce(remote, broker.bootstrap, "events", [f"k{i}" for i in range(6)])
        job = PipelineSpec(
            name="kafka",
            table=spec.name,
            app_id="kafka",
            source=KafkaSource(broker.bootstrap, topic="events", max_offsets_per_trigger=4),
            trigger="available-now",
            checkpoint=str(tmp_path / "checkpoints" / "kafka"),
        )

        first = run_pipeline(remote, job, spec)
        again = run_pipeline(remote, job, spec)
        produce(remote, broker.bootstrap, "events", ["k6", "k0"])  # k0 resent
        later = run_pipeline(remote, job, spec)

    assert [r.status for r in first.results] == ["committed", "committed"]
    assert again.results == []
    assert [(r.status, r.rows_inserted) for r in later.results] == [("committed", 1)]
    assert keys_of(remote, spec.name) == sorted(f"k{i}" for i in range(7))
    assert committed_batches(remote, spec.name) == {"kafka": 2}
    ranges = [e.meta.source.get("offsets") for e in read_ledger(remote, spec.name)]
    assert all(ranges), ranges


def test_moving_a_marker_needs_a_classic_session_and_says_so(remote: SparkSession) -> None:
    spec = make_table(remote)
    commit_batch(TableWriter(remote, spec, "app"), 0, rows(remote, ["a"]))

    with pytest.raises(ClassicOnlyError, match="not available over Spark Connect"):
        commit_markers(remote, spec.name, {"app": -1}, admin_metadata("app", -1, "reset", {}))

    assert committed_batches(remote, spec.name) == {"app": 0}


def test_a_crash_after_the_commit_over_remote_is_skipped_on_restart(
    tmp_path: Path,
) -> None:
    """The server's Python worker dies right after batch 1's commit, before its checkpoint."""
    landings = write_project(tmp_path, [Pipeline("events", "events-landing")], (EVENTS,))
    for n in range(3):
        land(landings["events"], f"{n}.json", events([f"e{n}-{i}" for i in range(4)]), mtime=n)
    with connect_server(tmp_path / ".lakehouse", fault="after_commit:exit@1") as running:
        crashed = run_lakehouse(tmp_path, "--remote", running.url, "ingest", "events")
        again = run_lakehouse(tmp_path, "--remote", running.url, "ingest", "events")
        counted = run_lakehouse(
            tmp_path,
            "--remote",
            running.url,
            "sql",
            "SELECT count(*) AS n, count(DISTINCT event_id) AS k FROM events",
            "--format",
            "csv",
        )
        # A client with another token than the server's is refused, in one line.
        refused = subprocess.run(
            [sys.executable, "-m", "ingest.cli", "--remote", running.url, "sql", "SELECT 1"],
            cwd=tmp_path,
            env={**child_env(), REMOTE_TOKEN_ENV: "not-the-servers-token"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    assert (refused.returncode, refused.stdout) == (1, ""), refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: the Spark Connect server at {running.url} refused this client: it sent the "
        f"token from {REMOTE_TOKEN_ENV}, not the server's (`lakehouse serve` keeps it in "
        f"<home>/serve/token for its user; another user sets {REMOTE_TOKEN_ENV})"
    ], refused.stderr
    assert crashed.returncode == 1, crashed.stderr
    assert crashed.stderr.strip().count("\n") <= 2, crashed.stderr
    assert "Traceback" not in crashed.stderr
    assert again.returncode == 0, again.stderr
    assert "batch 1: skipped" in again.stderr, again.stderr
    assert "batch 2: committed" in again.stderr, again.stderr
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.strip().splitlines()[-1] == "12,12"
