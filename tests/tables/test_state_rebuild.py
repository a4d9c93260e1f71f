"""Delta's state rebuild started early: beside a commit, or after it for the next commit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext

import pytest
from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from tables.delta.state_rebuild import NextStateRebuild, state_prefetched
from tables.delta.writer import SpeedDevices, TableWriter
from tables.engine.jvm import delta
from tables.spec import TableSpec
from tests.support.app_batches import two_rows, with_batches
from tests.support.jobs import spark_jobs


def _state_read(spark: SparkSession, table: str) -> Callable[[], dict[str, int]]:
    """Delta's own marker read: the state rebuild its idempotent writes wait for."""
    return lambda: delta.read_snapshot(spark, table, delta.state_markers)


def _rebuilding(table: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"lakehouse-state-{table}"]


@pytest.mark.parametrize("prefetched", [True, False])
def test_deltas_own_marker_read_needs_a_job_unless_the_state_was_prefetched(
    spark: SparkSession, make_table: Callable[..., TableSpec], prefetched: bool
) -> None:
    spec = with_batches(spark, make_table(), 0, 1)

    with state_prefetched(spark, spec.name) if prefetched else nullcontext():
        spark.range(10).count()  # the block's own work, beside the rebuild
    markers, jobs = spark_jobs(spark, _state_read(spark, spec.name))

    assert markers == {"app": 1}
    assert (jobs == 0) is prefetched


def test_the_prefetch_runs_its_follow_up_on_the_rebuilt_state(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    """`then` (the commit's key-range learning) runs after the rebuild, before the block ends."""
    spec = with_batches(spark, make_table(), 0, 1, 2)
    followed: list[str] = []

    with state_prefetched(spark, spec.name, then=lambda: followed.append("then")):
        spark.range(3).count()
    markers, jobs = spark_jobs(spark, _state_read(spark, spec.name))

    assert (markers, jobs) == ({"app": 2}, 0)
    assert followed == ["then"]


def test_a_failed_prefetch_is_left_to_the_read_that_needs_the_state(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    missing = f"{make_table().name}_never_created"

    with state_prefetched(spark, missing):
        done = spark.range(3).count()

    assert done == 3


@pytest.mark.parametrize("on", [True, False])
def test_the_next_commit_finds_the_version_it_reads_rebuilt_after_the_last_commit(
    spark: SparkSession, make_table: Callable[..., TableSpec], on: bool
) -> None:
    """A stream batch's commit starts the rebuild of the version it made (the speed device
    `next_state`); the next commit's marker check, Delta's own read, then runs no job. The
    rebuild's job stays in its starter's job group, where `make bench` counts a batch's jobs."""
    spec = with_batches(spark, make_table(), 0)
    writer = TableWriter(spark, spec, "app", devices=SpeedDevices(next_state=on))
    commit_batch(writer, 1, two_rows(spark, 1))

    def rebuilt() -> None:
        writer.next_state.start(spark, spec.name)
        writer.next_state.wait()

    _, started = spark_jobs(spark, rebuilt)
    markers, jobs = spark_jobs(spark, _state_read(spark, spec.name))

    assert markers == {"app": 1}
    assert (jobs == 0) is on
    assert (started > 0) is on
    assert _rebuilding(spec.name) == []


def test_a_rebuild_starts_by_itself_once_the_stream_is_idle(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = with_batches(spark, make_table(), 0, 1)
    rebuild = NextStateRebuild(idle_seconds=0.1)

    rebuild.start(spark, spec.name)
    deadline = time.monotonic() + 60
    while _rebuilding(spec.name) and time.monotonic() < deadline:
        time.sleep(0.05)  # nothing else happens: the stream is idle
    markers, jobs = spark_jobs(spark, _state_read(spark, spec.name))

    assert (markers, jobs) == ({"app": 1}, 0)
    rebuild.close()


def test_a_commit_that_begins_before_the_stream_went_idle_rebuilds_the_state_itself(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    """Back to back, the next commit preempts the rebuild: started early, it would only take
    the cores from the next batch's own work."""
    spec = with_batches(spark, make_table(), 0, 1)
    rebuild = NextStateRebuild(idle_seconds=30)

    rebuild.start(spark, spec.name)
    rebuild.preempt()
    rebuild.wait()
    markers, jobs = spark_jobs(spark, _state_read(spark, spec.name))

    assert markers == {"app": 1}
    assert jobs > 0  # the read built it: the preempted rebuild never ran
    assert _rebuilding(spec.name) == []


def test_a_run_closes_a_rebuild_no_commit_will_read_and_the_state_is_read_right_after(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    """`close` cancels the rebuild if still running and waits for its thread; a rebuild cut
    off midway leaves Delta's lazy state unbuilt, so the next read builds it whole."""
    spec = with_batches(spark, make_table(), 0, 1)
    rebuild = NextStateRebuild()

    rebuild.start(spark, spec.name)
    rebuild.close()
    markers = _state_read(spark, spec.name)()

    assert markers == {"app": 1}
    assert _rebuilding(spec.name) == []
    rebuild.close()  # nothing left to close: a no-op
    rebuild.wait()


def test_the_next_state_is_started_on_the_writers_session_and_shared_by_its_wrappers(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    """foreachBatch hands each batch its session anew (`TableWriter.on`): the run's rebuild,
    like its other caches, is the one the run closes."""
    spec = make_table()
    writer = TableWriter(spark, spec, "app")

    assert writer.on(spark.newSession()).next_state is writer.next_state
    assert writer.next_state.enabled
    off = TableWriter(spark, spec, "b", devices=SpeedDevices(next_state=False))
    assert not off.next_state.enabled
