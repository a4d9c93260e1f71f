"""The session a commit runs in: a thread's clone of a session, kept for its next commits.

Delta reads txn markers, userMetadata and the vacuum retention check from session-wide confs
(delta-io/delta#3934), so a commit sets them on a session no other thread uses
(`tables.delta.commits.commit_session`). Cloning per commit left a session in the JVM after every
MERGE; a thread keeps one clone per session instead, replaced when the session's confs change.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import TYPE_CHECKING, Any, cast

from tables.engine.confs import REMOTE_LEASE_CONF_PREFIX
from tables.engine.jvm import classic_confs_hash, classic_session_id, clone_classic, is_classic
from tables.engine.session import close_connect_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def clone_session(spark: SparkSession) -> SparkSession:
    """A copy of the session (its SQL confs and temp views included) whose confs change alone.

    Delta reads txn markers, userMetadata and the vacuum retention check from session-wide confs
    (delta-io/delta#3934); setting them on a clone keeps them to one operation. Spark Connect has
    `cloneSession`; a classic session's own is not public (`tables.engine.jvm.clone_classic`).
    """
    if is_classic(spark):
        return clone_classic(spark)
    connect: Any = spark
    clone = connect.cloneSession()
    clone._client = _OwnChannelClient(clone._client)
    return cast("SparkSession", clone)


class _OwnChannelClient:
    """A Spark Connect clone's client whose `close` closes its own channel and nothing else.

    PySpark's `SparkConnectClient.close` also shuts down the release thread pool all clients
    share, waiting for its calls; a session closes its client when it is garbage-collected, and
    with a token that can happen on the gRPC thread that signs a waiting call (the auth plugin),
    which then waits for itself: every later call of the process hangs. Seen with a read-only
    clone per statement (`tables.engine.readonly`); the one place this project reaches into the
    Connect client's internals.
    """

    def __init__(self, client: Any) -> None:
        self._wrapped = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def close(self) -> None:
        """Close this client's channel only."""
        self._wrapped._channel.close()
        self._wrapped._closed = True


def session_id(spark: SparkSession) -> str:
    """The id of the session the wrapper stands for: its JVM session's, or its server session's.

    Wrappers come and go (a classic `foreachBatch` wraps its batch's session anew each batch);
    the id names the session state they share.
    """
    if is_classic(spark):
        return classic_session_id(spark)
    connect: Any = spark
    return str(connect.session_id)


def confs_fingerprint(spark: SparkSession) -> int:
    """A number that changes when the session's SQL confs do (one call, not one per conf)."""
    if is_classic(spark):
        return classic_confs_hash(spark)
    # A remote client's lease changes every few seconds and says nothing about how to commit.
    return hash(
        frozenset(
            item
            for item in spark.conf.getAll.items()
            if not item[0].startswith(REMOTE_LEASE_CONF_PREFIX)
        )
    )


class SessionClones:
    """The clones commits run in: one per thread and session, kept for the next commit.

    Owned by whoever commits (a `tables.delta.writer.TableWriter` for a run, an operator
    command for its commits), so the clones go with their owner. A commit sets session confs of
    its own (delta-io/delta#3934), so it needs a session no other thread uses. A clone per commit
    would pay a session build each time, and Delta's MERGE keeps the session it ran in alive in
    the JVM: a clone per MERGE held one more SparkSession after every commit (about 0.4 MB each,
    measured), which a long stream cannot afford. A change to the session's own confs since the
    clone was made gets a new clone, so commits follow them.
    """

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep  # off: a clone per commit (a bench's A/B; it stays alive in the JVM)
        self._threads = threading.local()

    def _kept(self) -> dict[str, tuple[int, SparkSession]]:
        """This thread's clones by the id of the session each copies, with its confs' hash."""
        kept: dict[str, tuple[int, SparkSession]] = self._threads.__dict__.setdefault("kept", {})
        return kept

    def for_thread(self, spark: SparkSession) -> SparkSession:
        """This thread's clone of `spark`, made at its first use and kept for the next."""
        clones = self._kept()
        owner, fingerprint = session_id(spark), confs_fingerprint(spark)
        kept = clones.get(owner)
        if kept is not None and kept[0] == fingerprint:
            return kept[1]
        clone = clone_session(spark)
        if self.keep:
            clones[owner] = (fingerprint, clone)
        if not is_classic(clone):
            # A Connect clone has a channel of its own, whose exit-time clean-up call would
            # retry for minutes once the server is gone, as the session's would.
            atexit.register(close_connect_session, clone)
        return clone

    def forget(self, spark: SparkSession) -> None:
        """Drop this thread's kept clone of `spark`: its next commit gets a fresh one."""
        with contextlib.suppress(Exception):
            self._kept().pop(session_id(spark), None)
