"""A stream checkpoint held by one run at a time, and recovered from a killed run's temp files.

Spark writes each offsets, commits and source-log entry as `.<batch>.<uuid>.tmp` (with a
`..<batch>.<uuid>.tmp.crc` checksum on a local file system) and renames it into place. A run
killed during that write leaves the temp file behind; for batch 0, Spark then refuses the
checkpoint on every later run (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), so the pipeline is stuck
for good.

Such a file can be deleted safely only if no other run is writing into the checkpoint: a live
writer's temp file looks the same. "In use" is decided by a lock, not by a guess on file ages: a
run holds an exclusive `flock` on `<checkpoint>/.lakehouse.lock` for as long as its stream runs.
The kernel releases it when the process ends in any way (a SIGKILL included), so a lock that can
be taken means no live run holds the checkpoint, whichever host's process it was, as far as the
file system's locks reach (local disks and NFS). A second run on the same checkpoint stops with
one line instead of racing the first. On S3 a lease object written on condition does the lock's
work (`ingest.checkpoint_lease`). On another store without locks (abfss://, hdfs://, ...) temp
files are never deleted: the run stops with one line naming them and the fix. Over Spark Connect
such a store is listed by Spark, which hides temp files, so there Spark's own error names them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ingest.checkpoint_lease import CheckpointLease
from tables.engine.clones import session_id
from tables.engine.jvm import is_classic
from tables.engine.object_store import is_object_store
from tables.engine.storage import child_names, delete, local_path, read_bytes, walk_files
from tables.errors import TerminalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCK_FILE = ".lakehouse.lock"
#: The metadata logs of a stateless stream checkpoint (sources/<n> holds one per source).
LOG_DIRECTORIES = ("offsets", "commits", "sources")
_TEMP_FILE = re.compile(
    r"\.{1,2}\d+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp(\.crc)?"
)


class CheckpointInUseError(TerminalError):
    """Another live run holds the stream checkpoint."""


def is_spark_temp_file(name: str) -> bool:
    """True for the temp file (or its .crc) Spark writes before renaming a log entry into place."""
    return _TEMP_FILE.fullmatch(name) is not None


def last_committed_batch(spark: SparkSession, checkpoint: str) -> int:
    """The newest batch id Spark's commit log holds (-1 for none): what a new run will not redo."""
    names = child_names(spark, f"{checkpoint.rstrip('/')}/commits")
    return max((int(n) for n in names if n.isdigit()), default=-1)


def last_offsets_batch(spark: SparkSession, checkpoint: str) -> int | None:
    """The newest batch id Spark's offsets log holds: the batch a run began last (None: none)."""
    names = child_names(spark, f"{checkpoint.rstrip('/')}/offsets")
    return max((int(n) for n in names if n.isdigit()), default=None)


def batch_source_files(spark: SparkSession, checkpoint: str, batch_id: int) -> list[str] | None:
    """The files a file stream's batch reads, from its source log (None if it cannot be told).

    A micro-batch handed to foreachBatch is an opaque scan: it lists no input files. Spark's
    file source logs each batch's files before running it, in `sources/0/<batch>`, a `v1` line
    then one JSON entry per file, every tenth batch compacted into `<batch>.compact` with the
    entries of all batches before it. This is the one place that reads that log.
    """
    root = f"{checkpoint.rstrip('/')}/sources/0"
    data = read_bytes(spark, f"{root}/{batch_id}")
    if data is None:
        compacted = sorted(
            int(name.split(".")[0])
            for name in child_names(spark, root)
            if name.endswith(".compact") and name.split(".")[0].isdigit()
        )
        later = [n for n in compacted if n >= batch_id]
        data = read_bytes(spark, f"{root}/{later[0]}.compact") if later else None
    if data is None:
        return None
    lines = data.decode("utf-8").splitlines()[1:]
    entries = [json.loads(line) for line in lines if line.strip()]
    return [str(e["path"]) for e in entries if e.get("batchId") == batch_id]


def leftover_temp_files(spark: SparkSession, checkpoint: str) -> list[str]:
    """The temp files a killed run left in the checkpoint's logs (any store a listing reaches)."""
    root = checkpoint.rstrip("/")
    return sorted(
        name
        for directory in LOG_DIRECTORIES
        for name in walk_files(spark, f"{root}/{directory}")
        if is_spark_temp_file(name.rstrip("/").rsplit("/", 1)[-1])
    )


@dataclass(frozen=True)
class RunState:
    """Whether a run holds a checkpoint now, and who holds it (or held it last)."""

    state: Literal["running", "stopped", "not shown"]
    holder: str

    def describe(self) -> str:
        """The state as `status` shows it, in one line."""
        if self.state == "running":
            return f"running: {self.holder}"
        if self.state == "stopped":
            return f"stopped (last run: {self.holder})" if self.holder else "stopped"
        return f"not shown ({self.holder})"


def run_state(checkpoint: str) -> RunState:
    """Whether a live run holds a local checkpoint's lock (tried shared, never taken).

    A checkpoint on another store has no lock this process can try: its state is not shown.
    """
    local = local_path(checkpoint)
    if local is None:
        scheme = checkpoint.split(":", 1)[0]
        return RunState("not shown", f"a checkpoint on {scheme} has no lock to try")
    lock_file = local / LOCK_FILE
    if not lock_file.is_file():
        return RunState("stopped", "")
    with open(lock_file) as lock:
        holder = lock.read().strip()
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return RunState("running", holder or "unknown")
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return RunState("stopped", holder)


def _lock_exclusive(descriptor: int, tries: int = 20) -> None:
    """Take the lock, or raise BlockingIOError if a run holds it.

    `status` tries the lock shared for an instant (`run_state`): a run starting at that instant
    waits it out (up to 2 s) instead of taking it for another run's.
    """
    for _ in range(tries - 1):
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.1)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)


def where_it_runs(spark: SparkSession) -> str:
    """Where a run's batches run, as its holder line ends: "" in this process, else the Spark
    Connect session they go through (`lakehouse status` shows it)."""
    if is_classic(spark):
        return ""
    return f", through Spark Connect session {session_id(spark)}"


@contextlib.contextmanager
def hold_checkpoint(spark: SparkSession, checkpoint: str) -> Iterator[list[str]]:
    """Hold the checkpoint for one run; yield the killed runs' temp files this removed.

    Raises CheckpointInUseError if another live run holds it, and TerminalError naming the files
    if temp files are found where no lock can tell that they are abandoned.
    """
    local = local_path(checkpoint)
    if local is None and not is_classic(spark):
        # Over Spark Connect a remote store is listed by Spark, which hides temp files: Spark's
        # own error (with its hint) is what names them, if the stream meets one.
        yield []
        return
    if local is None and is_object_store(checkpoint):
        with CheckpointLease(spark, checkpoint):
            removed = leftover_temp_files(spark, checkpoint)  # the lease says no run writes them
            for name in removed:
                delete(spark, name)
            yield removed
        return
    if local is None:
        leftovers = leftover_temp_files(spark, checkpoint)
        if leftovers:
            raise TerminalError(
                f"checkpoint {checkpoint} holds temp files of a killed run "
                f"({', '.join(leftovers)}) and this store has no lock to tell that no other run "
                "is writing them: stop every run of the pipeline, delete those files, and run again"
            )
        yield []
        return

    def in_use(holder: str) -> CheckpointInUseError:
        return CheckpointInUseError(
            f"checkpoint {checkpoint} is in use by another run ({holder}): one run per "
            "checkpoint at a time; wait for it to end or stop it"
        )

    holder = f"pid {os.getpid()} on {os.uname().nodename}{where_it_runs(spark)}"
    with holding(local / LOCK_FILE, holder, in_use):
        removed = leftover_temp_files(spark, checkpoint)
        for name in removed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
        yield removed


def remove_stopped_query_temp_files(spark: SparkSession, checkpoint: str) -> list[str]:
    """Delete the temp files this run's own stopped query left; the names deleted.

    Spark plans the next batch as soon as it has checkpointed one: a stop between batches can
    interrupt it writing the next offsets entry, leaving its temp file. Call it only inside
    `hold_checkpoint` and after the query has stopped: then nothing else writes in the
    checkpoint. Where `hold_checkpoint` cannot tell that (a store with no lock, or one Spark
    Connect lists) the files stay, and the next run deals with them as with a killed run's.
    """
    local = local_path(checkpoint)
    if local is None and not (is_classic(spark) and is_object_store(checkpoint)):
        return []
    leftovers = leftover_temp_files(spark, checkpoint)
    for name in leftovers:
        delete(spark, name)
    return leftovers


@contextlib.contextmanager
def holding(
    path: Path, holder: str, in_use: Callable[[str], Exception], tries: int = 20
) -> Iterator[None]:
    """Hold an advisory lock on the file `path` (made with its directory), with `holder` written
    in it for whoever meets it; raise `in_use(the holder's line)` if a live process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as lock:
        try:
            _lock_exclusive(lock.fileno(), tries)
        except BlockingIOError as exc:
            lock.seek(0)
            raise in_use(lock.read().strip() or "unknown") from exc
        lock.seek(0)
        lock.truncate()
        lock.write(holder + "\n")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
