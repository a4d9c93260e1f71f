"""A stream run over `--remote` lives no longer than its client: the client's lease.

Over Spark Connect the stream runs in the server; a client killed with SIGKILL cannot stop it,
and its Python worker keeps the client's server-side session in use, so Spark never expires it.
So the client holds a lease in its own session: a session setting
(`spark.lakehouse.remote.lease.<app id>`) that a thread of the client renews every third of the
lease while it follows the query. The worker shares that session (SPARK-44462 attaches it by the
session id), reads the setting before each batch and refuses to start the batch once the lease
has lapsed: the query fails between batches, no batch starts after its client is gone for more
than the lease, and the next run re-runs the batch Spark had planned, exactly once, as after a
crash. A stream with no new data runs no batch; its query ends with its session, when Spark
Connect's session timeout closes it (`spark.connect.session.manager.defaultSessionTimeout`,
which `serve` sets). The setting is left out of the fingerprint that keeps commit clones
(`tables.engine.clones.confs_fingerprint`): a renewal must not cost a new clone.

The lease carries the client's wall clock: client and server clocks are assumed to agree within
seconds (NTP), which moves the stop by that much; a client clock ahead of the server's by more than
a lease is refused, since its lease would never lapse.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ingest.checkpoint_lease import lease_seconds
from tables.engine.confs import REMOTE_LEASE_CONF_PREFIX
from tables.errors import ClientGoneError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REMOTE_LEASE_SECONDS = 30.0
#: Sets another lease length (seconds, at least 3): the longest a stream outlives its client.
REMOTE_LEASE_SECONDS_ENV = "LAKEHOUSE_REMOTE_LEASE_SECONDS"


def remote_lease_seconds(setting: str | None) -> float:
    """The lease length `LAKEHOUSE_REMOTE_LEASE_SECONDS` sets, else `REMOTE_LEASE_SECONDS`."""
    return lease_seconds(setting, REMOTE_LEASE_SECONDS, REMOTE_LEASE_SECONDS_ENV)


def lease_conf(app_id: str) -> str:
    """The session setting holding `app_id`'s lease (app ids are plain identifiers)."""
    return f"{REMOTE_LEASE_CONF_PREFIX}{app_id}"


@dataclass(frozen=True)
class RemoteLease:
    """Who runs a remote stream, and when (client epoch seconds) it last said it still does."""

    owner: str
    renewed_at: float

    def encode(self) -> str:
        """The setting's value."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def decode(cls, text: str | None) -> RemoteLease | None:
        """The lease a setting holds; None if there is none or it is not one."""
        if not text:
            return None
        try:
            found = json.loads(text)
            return cls(str(found["owner"]), float(found["renewed_at"]))
        except (ValueError, TypeError, KeyError):
            return None


def is_lease_lapsed(lease: RemoteLease | None, now: float, seconds: float) -> bool:
    """True when the client has not renewed within the lease, or its clock runs a lease ahead."""
    if lease is None:
        return True
    return now - lease.renewed_at > seconds or lease.renewed_at - now > seconds


class ClientLease:
    """The client's side: renews the lease in its session from a thread of its own, every third
    of the lease, for as long as the client follows the query (`with ClientLease(...)`).

    A thread, not the loop that follows the query: that loop also reads the ledger and waits
    for a stop, either of which may take longer than a lease on a busy server.
    """

    def __init__(self, spark: SparkSession, app_id: str, seconds: float) -> None:
        self.spark, self.app_id, self.seconds = spark, app_id, seconds
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_stopped, daemon=True)

    def __enter__(self) -> ClientLease:
        self.renew()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopped.set()
        self._thread.join(self.seconds)

    def renew(self) -> None:
        """Say the client is here now."""
        owner = f"pid {os.getpid()} on {socket.gethostname()}"
        self.spark.conf.set(lease_conf(self.app_id), RemoteLease(owner, time.time()).encode())

    def _renew_until_stopped(self) -> None:
        while not self._stopped.wait(self.seconds / 3):
            with contextlib.suppress(Exception):  # a missed renewal is retried a third later
                self.renew()


def assert_client_present(
    spark: SparkSession, pipeline: str, app_id: str, batch_id: int, seconds: float
) -> None:
    """Raise ClientGoneError, naming the client, if its lease has lapsed (the worker's side)."""
    lease = RemoteLease.decode(spark.conf.get(lease_conf(app_id), None))
    now = time.time()
    if not is_lease_lapsed(lease, now, seconds):
        return
    if lease is None:
        raise ClientGoneError(
            f"stream {pipeline} stopped before batch {batch_id}: its session holds no client "
            "lease; run the pipeline again to go on"
        )
    if lease.renewed_at > now:
        raise ClientGoneError(
            f"stream {pipeline} stopped before batch {batch_id}: the clock of its client "
            f"({lease.owner}) is {lease.renewed_at - now:.0f} s ahead of the server's, more than "
            f"the {seconds:.0f} s lease; set the clocks right (NTP) and run the pipeline again"
        )
    raise ClientGoneError(
        f"stream {pipeline} stopped before batch {batch_id}: its client ({lease.owner}) last "
        f"renewed its lease {now - lease.renewed_at:.0f} s ago (lease {seconds:.0f} s); run the "
        "pipeline again to go on"
    )
