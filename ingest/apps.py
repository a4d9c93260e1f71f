"""App ids and their markers: listing them, and the explicit, recorded way to move one.

Moving a marker is the operator's answer to a lost checkpoint or a re-ingestion. Delta's own
idempotent-write confs cannot move a marker backwards (a version at or below the marker is
skipped), so the reset is a commit of a bare SetTransaction action through delta-spark's JVM
transaction API, with a ledger entry of kind `reset` in the same commit.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import SparkSession

from tables.catalog import require_table
from tables.errors import ConfigError
from tables.identifiers import validate_app_id
from tables.log import (
    USER_METADATA_CONF,
    CommitMetadata,
    committed_batches,
    delta_log,
    read_ledger,
    table_version,
)
from tables.session import clone_session, jvm_of

if TYPE_CHECKING:
    from tables.log import LedgerEntry

ResetDirection = Literal["back", "forward", "same"]


@dataclass(frozen=True)
class AppState:
    """An app id's marker and its most recent ledger entry."""

    app_id: str
    last_batch: int
    last_version: int | None
    last_commit_at: Any

    def as_row(self) -> dict[str, Any]:
        """Flatten for display and export."""
        return {
            "app_id": self.app_id,
            "last_batch": self.last_batch,
            "last_version": self.last_version,
            "last_commit_at": self.last_commit_at,
        }


def list_apps(spark: SparkSession, table: str) -> list[AppState]:
    """Every app id with a marker in the table, with its latest ledger entry (if in history)."""
    markers = committed_batches(spark, table)
    latest: dict[str, LedgerEntry] = {}
    for entry in read_ledger(spark, table):
        latest.setdefault(entry.meta.app_id, entry)
    return [
        AppState(
            app_id,
            batch,
            latest[app_id].version if app_id in latest else None,
            latest[app_id].committed_at if app_id in latest else None,
        )
        for app_id, batch in sorted(markers.items())
    ]


def reset_direction(current: int | None, target: int) -> ResetDirection:
    """Where a reset moves the marker: back re-admits batches, forward skips them."""
    if current is not None and target == current:
        return "same"
    return "back" if current is None or target < current else "forward"


def validate_reset(current: int | None, target: int, *, force: bool) -> ResetDirection:
    """Check a reset: the target is >= -1, and moving forward (skipping batches) needs force."""
    if target < -1:
        raise ConfigError(f"--to-batch must be -1 (nothing committed) or a batch id, got {target}")
    direction = reset_direction(current, target)
    if direction == "forward" and not force:
        raise ConfigError(
            f"moving the marker forward from {current} to {target} makes the stream skip batches "
            "it has not committed (their rows would never land); pass --force if that is meant"
        )
    return direction


def reset_app(spark: SparkSession, table: str, app_id: str, to_batch: int) -> int:
    """Commit a SetTransaction(app_id, to_batch) with a `reset` ledger entry; return its version.

    After it, batches above `to_batch` are treated as new; `-1` means nothing is committed, so a
    fresh checkpoint may start again at batch 0.
    """
    validate_app_id(app_id)
    require_table(spark, table)
    jvm = jvm_of(spark)
    meta = CommitMetadata(
        app_id=app_id,
        batch_id=to_batch,
        source={"kind": "reset"},
        rows_read=0,
        rows_quarantined=0,
        content_hash="",
        commit_token=uuid.uuid4().hex,
        kind="reset",
    )
    clone = clone_session(spark)
    clone.conf.set(USER_METADATA_CONF, meta.to_json())
    action = jvm.org.apache.spark.sql.delta.actions.SetTransaction(
        app_id, to_batch, jvm.scala.Some(int(time.time() * 1000))
    )
    actions = jvm.java.util.ArrayList()
    actions.add(action)
    operation = getattr(
        getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$ManualUpdate$"), "MODULE$"
    )
    sessions = jvm.org.apache.spark.sql.SparkSession
    # The transaction reads userMetadata from the thread's active session: make it the clone.
    sessions.setActiveSession(clone._jsparkSession)
    try:
        delta_log(spark, table).startTransaction().commit(
            jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toSeq(), operation
        )
    finally:
        sessions.setActiveSession(spark._jsparkSession)
    return table_version(spark, table)
