"""The bench's workloads: generated batches, the write paths compared, and the tables they fill.

Every write path takes a batch number `i` and writes batch `i`, so `interleaved_medians` can
run the two sides of a ratio in turns on the same data.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.commit.prepare import with_lineage
from ingest.outcomes import audit_after_commit, outcomes_of
from ingest.sources.fingerprint import digest
from quality.check_results import ResultLog
from tables.delta.commits import commit_markers
from tables.delta.history import table_version
from tables.delta.ledger import admin_metadata
from tables.delta.table import table_detail
from tables.delta.writer import SpeedDevices, TableWriter
from tables.engine.jvm import code_compilations
from tables.spec import TableSpec

SCHEMA = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE, event_time TIMESTAMP"
START = datetime(2026, 1, 1)
Action = Callable[[int], object]
#: The stage of the job Delta's `Snapshot.transactions` runs to rebuild a new version's state
#: before an idempotent write checks its marker (delta-io/delta#4708; the commit prefetches it).
STATE_REBUILD_STAGE = "transactions at "


class JobCount(NamedTuple):
    """A job group's Spark jobs, and how many of them are Delta's state rebuild."""

    total: int
    state_rebuilds: int


def jobs_of_group(spark: SparkSession, group: str) -> JobCount:
    """Count the Spark jobs run in `group` (threads started from it included), by kind.

    Read right after the group's work: Spark keeps the last 100 jobs and stages of an embedded
    session (`tables/engine/session.py`), so a job whose stages are gone counts as not Delta's.
    """
    tracker = spark.sparkContext.statusTracker()
    ids = tracker.getJobIdsForGroup(group)
    rebuilds = 0
    for job in ids:
        info = tracker.getJobInfo(job)
        stages = [tracker.getStageInfo(stage) for stage in (info.stageIds if info else [])]
        if any(s is not None and s.name.startswith(STATE_REBUILD_STAGE) for s in stages):
            rebuilds += 1
    return JobCount(len(ids), rebuilds)


def batch(spark: SparkSession, first: int, rows: int, days: float = 0.0) -> DataFrame:
    """`rows` events with ids from `first`, spread over one day starting `days` after START."""
    return spark.range(first, first + rows).select(
        F.concat(F.lit("e"), F.col("id").cast("string")).alias("event_id"),
        F.concat(F.lit("u"), (F.col("id") % 1000).cast("string")).alias("user_id"),
        (F.col("id") % 997 / 7).cast("double").alias("amount"),
        (
            F.lit(START + timedelta(days=days)).cast("timestamp")
            + F.make_dt_interval(
                F.lit(0), F.lit(0), F.lit(0), (F.col("id") % 86400).cast("decimal(18,6)")
            )
        ).alias("event_time"),
    )


def interleaved_medians(actions: dict[str, Action], runs: int) -> dict[str, float]:
    """Median wall time of each `action(i)` for i in 1..runs, the actions taking turns."""
    return {name: statistics.median(spent) for name, spent in interleaved(actions, runs).items()}


def interleaved(actions: dict[str, Action], runs: int) -> dict[str, list[float]]:
    """Wall time of each `action(i)` for i in 1..runs, the actions taking turns.

    Each action is warmed up once with i = 0, then every round runs each action once. Taking
    turns puts both sides of a ratio in the same minutes, so a slow spell of a shared machine
    lands on both instead of on whichever side was measured during it. The order turns by one
    each round: the action run first in a round was the slowest, the same stream round measured
    as two sides 0.589 s a batch first and 0.547 s second (2026-12-06), so no side keeps that
    place.
    """
    for action in actions.values():
        action(0)
    names = list(actions)
    times: dict[str, list[float]] = {name: [] for name in actions}
    for i in range(1, runs + 1):
        turn = (i - 1) % len(names)
        for name in names[turn:] + names[:turn]:
            started = time.perf_counter()
            actions[name](i)
            times[name].append(time.perf_counter() - started)
    return times


def delta_append(
    frame: DataFrame,
    table: str,
    app_id: str,
    batch_id: int,
    *,
    idempotent: bool = False,
) -> None:
    """Blind-append `frame` with the lineage columns; with Delta's txnAppId/txnVersion if asked."""
    writer = (
        with_lineage(frame, app_id, batch_id, datetime.now(UTC))
        .write.format("delta")
        .mode("append")
    )
    if idempotent:
        writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
    writer.saveAsTable(table)


def grow_log(spark: SparkSession, table: TableSpec, commits: int) -> None:
    """Commit bare markers (app id `log`) until the table's log is at version `commits`.

    Only the log's length matters here (its files, and the checkpoints Delta writes every ten
    commits), not what each commit holds: a marker-only commit writes no data file. Each still
    pays Delta's commit path (about 0.7 s on a quiet 2-core machine), so 1,000 of them are most
    of the default run's 15 minutes.
    """
    for n in range(table_version(spark, table.name), commits):
        meta = admin_metadata("log", n, "reset", {"kind": "bench", "commit": n})
        commit_markers(spark, table.name, {"log": n}, meta)


def committer(
    spark: SparkSession, table: TableSpec, rows: int, first: int = 30_000_000, days: float = 0.0
) -> Action:
    """Commit batch `i` exactly once as app id `b`: `rows` events with ids from `first + i*rows`.

    Every workload's ids have eight digits, so a batch's key range (as text) holds its own keys
    only, as with time-ordered ids: the audit reads no earlier batch's files. (Ids from 0 would
    put `e100000` inside the range `e0`-`e19999` of batch 0.)

    The batch's source record carries a fingerprint of the generator's arguments, which fix its
    content, as a file source's carries its files: a re-run of the batch is checked by it.
    """

    writer = TableWriter(spark, table, "b")  # one per workload: its caches carry over

    def commit(i: int) -> object:
        start = first + i * rows
        source = {"kind": "generated", "fingerprint": digest([f"events {start} {rows} {days}"])}
        return commit_batch(
            writer,
            i,
            batch(spark, start, rows, days),
            CommitOptions(source=source),
        )

    return commit


def with_conf(spark: SparkSession, key: str, value: str, action: Action) -> Action:
    """`action` with the session's `key` set to `value` for its run, put back after it."""

    def run(i: int) -> object:
        before = spark.conf.get(key, None)
        spark.conf.set(key, value)
        try:
            return action(i)
        finally:
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)

    return run


def appender(spark: SparkSession, table: TableSpec, rows: int, *, idempotent: bool) -> Action:
    """Append batch `i` to `table`: blind (app id `a`), or Delta's idempotent append (app `t`)."""

    def append(i: int) -> None:
        app_id = "t" if idempotent else "a"
        delta_append(batch(spark, i * rows, rows), table.name, app_id, i, idempotent=idempotent)

    return append


def fill(spark: SparkSession, spec: TableSpec, rows: int, chunk: int, days: int) -> None:
    """Bring a table to `rows` rows in big appends, older rows earlier in `days` (app id `fill`)."""
    current = spark.table(spec.name).count()
    n = 0
    while current < rows:
        size = min(chunk, rows - current)
        frame = batch(spark, 10_000_000 + current, size, days=current * days // rows)
        delta_append(frame, spec.name, "fill", n)
        current += size
        n += 1


def in_parallel(actions: list[Callable[[], object]], workers: int = 2) -> None:
    """Run set-up actions (table fills) two at a time: they do not touch each other's tables."""
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda action: action(), actions))


def files_of(spark: SparkSession, table: TableSpec) -> tuple[int, int]:
    """The table's version and file count: a skip must change neither."""
    return table_version(spark, table.name), table_detail(spark, table.name).num_files


class BatchSeconds(NamedTuple):
    """One stream batch's seconds: its commit (the next state's rebuild started), its audit."""

    commit: float
    audit: float


def stream_batch(
    writer: TableWriter, batch_id: int, frame: DataFrame, outcomes: ResultLog
) -> BatchSeconds:
    """Commit `frame` as a stream batch, as the runner does, and settle its audit.

    The runner's steps per batch (`ingest.stream_commit.commit_stream_batch`, then
    `audit_after_commit`), without the pipeline they take their batch from: the commit, the
    rebuild of the version it wrote started for the next batch, the audit and its outcome
    buffered (`outcomes` appends it on its own cadence).
    """
    started = time.perf_counter()
    result = commit_batch(writer, batch_id, frame)
    if result.status != "skipped":
        writer.next_state.start(writer.spark, writer.spec.name)
    committed = time.perf_counter()
    audit_after_commit(writer, result, outcomes)
    return BatchSeconds(committed - started, time.perf_counter() - committed)


def stream_rounds(
    spark: SparkSession,
    table: TableSpec,
    rows: int,
    per_round: int,
    parts: dict[str, list[float]],
    jobs: list[JobCount],
    devices: SpeedDevices | None = None,
) -> Action:
    """`per_round` batches as `lakehouse ingest` runs them in a stream, then its outcomes append.

    Each batch is committed, its audit settled and its outcomes buffered, as the runner does;
    the buffer is appended to `lakehouse_quality` when it holds `FLUSH_EVERY` batches (the
    runner's cadence, the default round) and at the end of the round (a shorter round pays the
    append more often than a stream would), and the state rebuild its last commit left pending
    ends with it. Returns the round's time per batch via the caller.
    `devices` switches the writer's speed devices (all on by default).
    """
    outcomes = outcomes_of(spark, table, "s")
    writer = TableWriter(spark, table, "s", devices=devices or SpeedDevices())  # carries over
    counter = iter(range(10**9))

    def run(_: int) -> object:
        group = f"bench-stream-{time.monotonic_ns()}"
        spark.sparkContext.setJobGroup(group, group)
        try:
            for _ in range(per_round):
                n = next(counter)
                spent = stream_batch(writer, n, batch(spark, 70_000_000 + n * rows, rows), outcomes)
                parts["commit"].append(spent.commit)
                parts["audit"].append(spent.audit)
            started = time.perf_counter()
            outcomes.flush()
            parts["append of outcomes"].append(time.perf_counter() - started)
            # The rebuild the last batch left pending ends with the round (dropped if not
            # started, as a run's end does): the next side's time must not hold it.
            writer.next_state.close()
        finally:
            jobs.append(jobs_of_group(spark, group))
        return None

    return run


def counting_jobs(spark: SparkSession, action: Action, counts: list[JobCount]) -> Action:
    """`action`, run in a Spark job group of its own; each run's job count goes to `counts`."""

    def counted(i: int) -> object:
        group = f"bench-{time.monotonic_ns()}"
        spark.sparkContext.setJobGroup(group, group)
        try:
            return action(i)
        finally:
            counts.append(jobs_of_group(spark, group))

    return counted


def counting_compilations(spark: SparkSession, action: Action, counts: list[int]) -> Action:
    """`action`; each run's count of code compilations in the driver JVM goes to `counts`."""

    def counted(i: int) -> object:
        before = code_compilations(spark)
        try:
            return action(i)
        finally:
            counts.append(code_compilations(spark) - before)

    return counted


def per_batch(action: Action, batches: int) -> Action:
    """`action` repeated `batches` times, so its median compares with a round of `batches`."""

    def run(i: int) -> object:
        for j in range(batches):
            action(i * batches + j)
        return None

    return run
