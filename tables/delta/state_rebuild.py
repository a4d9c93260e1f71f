"""Delta's state rebuild started early: beside a commit's preparation, or after it for the next.

Delta's idempotent write reads its marker through `Snapshot.transactions`, which rebuilds the
state of each new version with a Spark job (delta-io/delta#4708, fixed on Delta's master by
#6929, in no release yet), and any scan of the table waits for the same rebuild. Neither needs
the batch being committed, so the rebuild can run in a thread of its own while other work goes
on. The rebuild is Delta's own (a lazy, once-per-snapshot value): the marker stays Delta's to
check, and a failure here is left to the read that needs the state, which raises it with its
context. Classic sessions only; over Spark Connect nothing is started.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark import InheritableThread

from tables.engine.jvm import delta, is_classic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def state_prefetched(
    spark: SparkSession, table: str, then: Callable[[], object] | None = None
) -> Iterator[None]:
    """Rebuild the state of the table's snapshot last read in the background while the block runs.

    A commit starts it beside its own preparation, on the second core, instead of after it.
    `then` runs in the same thread after the rebuild (work on the rebuilt state that can also
    stay off the critical path); its errors, like the rebuild's, are left to the work that needs
    its result.
    """
    thread = _start_rebuild(spark, table, then)
    try:
        yield
    finally:
        if thread is not None:
            thread.join()


#: Seconds a stream must stay idle after a commit before the next version's rebuild starts.
IDLE_SECONDS = 0.2


@dataclass
class NextStateRebuild:
    """The rebuild of the version a writer's commit made, started for the writer's next commit
    once the stream goes idle.

    Each commit starts the rebuild of the version it read (`state_prefetched`), beside its
    preparation, which shares the cores with it; a stream's next batch reads the version this
    batch made. A stream that waits for its next trigger can build it meanwhile: `start` (after
    a commit) waits `idle_seconds`, then rebuilds unless the next commit began first
    (`preempt`), and the next commit finds the state built. Back to back (a backlog, an
    available-now run), the next commit preempts it and starts the rebuild itself as before:
    started early there, the rebuild would only move from one commit's start to the previous
    one's end (docs/benchmarks.md, "Paced batches"). One per writer, kept with its other
    caches; a run ends it with `close`, which cancels a rebuild still running (no commit of the
    run reads it).
    """

    enabled: bool = True
    idle_seconds: float = IDLE_SECONDS
    _pending: _Pending | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self, spark: SparkSession, table: str) -> None:
        """Rebuild the state of the snapshot this process read or made last, in a thread, once
        `idle_seconds` have passed without a `preempt`.

        A rebuild still pending from an earlier commit is closed first: its version is no longer
        the newest.
        """
        if not self.enabled or not is_classic(spark):
            return
        self.close()
        pending = _Pending(spark, f"lakehouse-next-state-{uuid.uuid4().hex}")
        pending.thread = _start_rebuild(
            spark, table, None, tag=pending.tag, gate=pending.gate(self.idle_seconds)
        )
        with self._lock:
            self._pending = pending

    def preempt(self) -> None:
        """A commit begins: a rebuild not yet started is not started (the commit starts its
        own); one under way goes on, as the commit needs its result."""
        with self._lock:
            pending = self._pending
        if pending is not None:
            pending.skip.set()
            pending.go.set()

    def wait(self) -> None:
        """Start a pending rebuild now, skipping the idle wait, and wait for it to end."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.go.set()
            pending.join()

    def close(self) -> None:
        """Drop a pending rebuild, cancel one under way, and wait for its thread to end."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        pending.skip.set()
        pending.go.set()
        with contextlib.suppress(Exception):  # a session already stopped cancelled it
            pending.spark.sparkContext.cancelJobsWithTag(pending.tag)
        pending.join()


@dataclass
class _Pending:
    """A next-state rebuild's thread, its jobs' tag, and the events that start or skip it."""

    spark: SparkSession
    tag: str
    go: threading.Event = field(default_factory=threading.Event)
    skip: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def gate(self, idle_seconds: float) -> Callable[[], bool]:
        """True once `idle_seconds` passed or `go` was set, unless skipped meanwhile."""

        def should_rebuild() -> bool:
            self.go.wait(idle_seconds)
            return not self.skip.is_set()

        return should_rebuild

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


def _start_rebuild(
    spark: SparkSession,
    table: str,
    then: Callable[[], object] | None,
    tag: str | None = None,
    gate: Callable[[], bool] = lambda: True,
) -> threading.Thread | None:
    """Rebuild the state of the snapshot this process read last in a daemon thread, its jobs
    tagged `tag` if given (for a cancel; they stay in the caller's job group, where `make bench`
    counts them), once `gate` says so; None over Spark Connect (nothing to rebuild through its
    public APIs)."""
    if not is_classic(spark):
        return None

    def rebuild() -> None:
        if not gate():
            return
        if tag is not None:
            spark.sparkContext.addJobTag(tag)
        with contextlib.suppress(Exception):
            delta.read_snapshot(spark, table, delta.state_markers, fresh=False)
            if then is not None:
                then()

    thread = InheritableThread(target=rebuild, name=f"lakehouse-state-{table}", daemon=True)
    thread.start()
    return thread
