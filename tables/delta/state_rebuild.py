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


@dataclass
class NextStateRebuild:
    """The rebuild of the version a writer's commit made, started for the writer's next commit.

    Each commit starts the rebuild of the version it read (`state_prefetched`), beside its
    preparation, which shares the cores with it; a stream's next batch reads the version this
    batch made. Started when the commit ends (`start`), the rebuild runs while the batch's audit
    settles, its outcome is buffered and the stream waits for its next trigger, and the next
    commit finds the state built. One per writer, kept with its other caches; a run ends it with
    `close`, which cancels a rebuild still running (no commit of the run will read it).
    """

    enabled: bool = True
    _pending: tuple[threading.Thread, str, SparkSession] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self, spark: SparkSession, table: str) -> None:
        """Rebuild the state of the snapshot this process read or made last, in a thread.

        A rebuild still running from an earlier commit is cancelled first: its version is no
        longer the newest.
        """
        if not self.enabled or not is_classic(spark):
            return
        self.close()
        tag = f"lakehouse-next-state-{uuid.uuid4().hex}"
        thread = _start_rebuild(spark, table, None, tag=tag)
        if thread is not None:
            with self._lock:
                self._pending = (thread, tag, spark)

    def wait(self) -> None:
        """Wait for a rebuild still running to end (`make bench` charges it to its round)."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending[0].join()

    def close(self) -> None:
        """Cancel a rebuild still running and wait for its thread to end."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        thread, tag, spark = pending
        with contextlib.suppress(Exception):  # a session already stopped cancelled it
            spark.sparkContext.cancelJobsWithTag(tag)
        thread.join()


def _start_rebuild(
    spark: SparkSession,
    table: str,
    then: Callable[[], object] | None,
    tag: str | None = None,
) -> threading.Thread | None:
    """Rebuild the state of the snapshot this process read last in a daemon thread, its jobs
    tagged `tag` if given (for a cancel; they stay in the caller's job group, where `make bench`
    counts them); None over Spark Connect (nothing to rebuild through its public APIs)."""
    if not is_classic(spark):
        return None

    def rebuild() -> None:
        if tag is not None:
            spark.sparkContext.addJobTag(tag)
        with contextlib.suppress(Exception):
            delta.read_snapshot(spark, table, delta.state_markers, fresh=False)
            if then is not None:
                then()

    thread = InheritableThread(target=rebuild, name=f"lakehouse-state-{table}", daemon=True)
    thread.start()
    return thread
