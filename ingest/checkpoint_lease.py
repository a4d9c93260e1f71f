"""One run per checkpoint on S3: a lease object written on condition, renewed while it runs.

A local checkpoint is held with `flock` (`ingest.checkpoint`), which the kernel releases when the
process ends. S3 has no locks, but it has conditional PUTs: the run creates
`<checkpoint>/.lakehouse.lease` only if no object is there (`If-None-Match: *`), renews it every
third of the lease (`LEASE_SECONDS`, or `LAKEHOUSE_CHECKPOINT_LEASE_SECONDS`) only if it is still
the object it wrote (`If-Match` its entity tag), and deletes it at the end. A second run finds a
live lease and stops in one line, naming the holder; a lease whose run was killed expires a
lease's length after its last renewal, or at once when its holder
was a process of this host that is gone, and the next run takes it over, again on condition, so
two runs cannot both take one stale lease.

The lease keeps two runs from writing one checkpoint at once. It is not what keeps a paused run
(a zombie) from committing after another took over: the target table's log is (its SetTransaction
markers refuse a batch id already committed).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from tables.engine.jvm.objects import StoredObject, put_object, read_object
from tables.engine.storage import delete
from tables.errors import ConfigError, TransientError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LEASE_FILE = ".lakehouse.lease"
LEASE_SECONDS = 60.0
#: Sets another lease length (seconds, at least 3), as for a run whose store answers slowly;
#: the holder renews at a third of it.
LEASE_SECONDS_ENV = "LAKEHOUSE_CHECKPOINT_LEASE_SECONDS"


def lease_seconds(
    setting: str | None, default: float = LEASE_SECONDS, variable: str = LEASE_SECONDS_ENV
) -> float:
    """The lease length the environment `variable` sets (seconds, at least 3), else `default`.

    Shared by the checkpoint's lease and a remote stream's (`ingest.remote_lease`).
    """
    if setting is None or not setting.strip():
        return default
    try:
        seconds = float(setting)
    except ValueError:
        seconds = 0.0
    if seconds < 3:
        raise ConfigError(f"{variable} must be a number of seconds >= 3, got {setting!r}")
    return seconds


class CheckpointLeaseError(TransientError):
    """Another run holds the checkpoint's lease on S3: trying later may succeed (exit 75)."""


@dataclass(frozen=True)
class Lease:
    """Who holds a checkpoint, and until when (epoch seconds) unless renewed."""

    owner: str
    host: str
    pid: int
    expires_at: float

    def encode(self) -> bytes:
        """The lease object's content."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    def describe(self) -> str:
        """The holder, as an error names it."""
        until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.expires_at))
        return f"pid {self.pid} on {self.host}, lease until {until}"


def decode_lease(content: bytes) -> Lease | None:
    """The lease an object holds, or None if it is not one (an unreadable object expires)."""
    try:
        raw = json.loads(content)
        return Lease(str(raw["owner"]), str(raw["host"]), int(raw["pid"]), float(raw["expires_at"]))
    except (ValueError, KeyError, TypeError):
        return None


def is_expired(lease: Lease | None, now: float, host: str, is_alive: Callable[[int], bool]) -> bool:
    """True if a lease no longer holds the checkpoint: its time ran out, its holder was a
    process of `host` (this one) that is gone, or the object was no lease."""
    if lease is None or lease.expires_at <= now:
        return True
    return lease.host == host and not is_alive(lease.pid)


def is_process_alive(pid: int) -> bool:
    """True if a process with that id runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CheckpointLease:
    """The lease of one run on one checkpoint: taken on enter, renewed, released on exit."""

    def __init__(self, spark: SparkSession, checkpoint: str) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.location = f"{checkpoint.rstrip('/')}/{LEASE_FILE}"
        self.owner = uuid.uuid4().hex
        self.etag: str | None = None
        self.lost = False
        self.seconds = lease_seconds(os.environ.get(LEASE_SECONDS_ENV))
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _lease(self) -> Lease:
        return Lease(self.owner, socket.gethostname(), os.getpid(), time.time() + self.seconds)

    def __enter__(self) -> CheckpointLease:
        self.etag = put_object(self.spark, self.location, self._lease().encode())
        if self.etag is None:
            self.etag = self._take_over(read_object(self.spark, self.location))
        self._renewer = threading.Thread(
            target=self._renew, name=f"lease-{self.checkpoint}", daemon=True
        )
        self._renewer.start()
        return self

    def _take_over(self, found: StoredObject | None) -> str:
        """Take a lease whose holder's time ran out; refuse one that still holds."""
        held = decode_lease(found.content) if found is not None else None
        here = socket.gethostname()
        if found is not None and not is_expired(held, time.time(), here, is_process_alive):
            assert held is not None
            raise CheckpointLeaseError(
                f"checkpoint {self.checkpoint} is in use by another run ({held.describe()}): one "
                "run per checkpoint at a time; wait for it to end, or for the lease of a killed "
                f"run to expire (at most {max(held.expires_at - time.time(), 0):.0f} s)"
            )
        replacing = found.etag if found is not None else None
        etag = put_object(self.spark, self.location, self._lease().encode(), replacing)
        if etag is None:
            raise CheckpointLeaseError(
                f"checkpoint {self.checkpoint}: another run took its lease at the same moment"
            )
        return etag

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                etag = put_object(self.spark, self.location, self._lease().encode(), self.etag)
            except Exception:  # a store that cannot be reached now: try again next time
                continue
            if etag is None:
                self.lost = True  # another run took it over: the log's markers fence this one
                return
            self.etag = etag

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.lost:
            return
        found = read_object(self.spark, self.location)
        if found is not None and found.etag == self.etag:
            delete(self.spark, self.location)
