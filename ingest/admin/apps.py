"""App ids and their markers: listing them, and the explicit, recorded way to move one.

Moving a marker is the operator's answer to a lost checkpoint or a re-ingestion. An app owns three
markers per table (`quality.marker_names`: target, quarantine, audit record); a reset moves all
three, each as a commit of a bare SetTransaction action (`tables.delta.commits.commit_markers`) with
a ledger entry of kind `reset`. The target's commit goes first and names the markers, with the ones
it must move and the version each of their tables was at; a reset cut short after it is found
(`pending_reset`) and finished by the next reset-app or ingest. A marker counts as moved when its
table's log holds this reset's commit, not by where it stands: the first batch after a reset may
write its rejected rows (moving the quarantine marker past the reset's batch) and crash before
its target commit, which leaves the reset the target's latest entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import SparkSession

from quality.marker_names import Marker, batch_markers
from tables.delta.commits import commit_markers
from tables.delta.history import latest_ledger_entry, read_ledger, table_version
from tables.delta.ledger import admin_metadata
from tables.delta.markers import committed_batch, committed_batches
from tables.delta.table import require_table, table_exists
from tables.errors import ConfigError
from tables.faults import fault_point
from tables.identifiers import validate_app_id

if TYPE_CHECKING:
    from tables.delta.ledger import LedgerEntry

ResetDirection = Literal["back", "forward", "same"]
#: How many of the table's latest commits are searched for the app's latest ledger entry.
_RESET_LOOKBACK = 64


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


def validate_reset_target(target: int) -> None:
    """Refuse a reset target below -1; pure, so it is checked before Spark starts."""
    if target < -1:
        raise ConfigError(f"--to-batch must be -1 (nothing committed) or a batch id, got {target}")


def validate_reset(current: int | None, target: int, *, force: bool) -> ResetDirection:
    """Check a reset: the target is >= -1, and moving forward (skipping batches) needs force."""
    validate_reset_target(target)
    direction = reset_direction(current, target)
    if direction == "forward" and not force:
        raise ConfigError(
            f"moving the marker forward from {current} to {target} makes the stream skip batches "
            "it has not committed (their rows would never land); pass --force if that is meant"
        )
    return direction


@dataclass(frozen=True)
class PendingReset:
    """A reset whose ledger entry is in the target but whose other markers were not all moved."""

    table: str
    app_id: str
    to_batch: int
    version: int
    behind: tuple[tuple[Marker, int], ...]

    def describe(self) -> str:
        """One line: which reset is half done, and which markers still hold which batch."""
        markers = ", ".join(
            f"{m.table} ({m.txn_app_id}) still at {batch}" for m, batch in self.behind
        )
        return (
            f"the reset of app id {self.app_id!r} in {self.table} to batch {self.to_batch} "
            f"(version {self.version}) is half done: {markers}"
        )


def is_marker_moved(current: int | None, to_batch: int, *, forward: bool) -> bool:
    """True if a quarantine or audit marker is where a reset to `to_batch` left it, or beyond.

    A reset back has moved a marker once it no longer skips a batch above `to_batch`; a reset
    forward, once the marker is no longer below it (else its batches' rejected rows and audit
    records would be written again for batches the target skips). A marker past a forward
    reset's batch may be a later batch's, written before its target commit: it is left alone.
    """
    level = -1 if current is None else current
    return level >= to_batch if forward else level <= to_batch


def is_reset_ruled_out(newest: LedgerEntry | None, version: int, app_id: str) -> bool:
    """True if the table's newest commit shows that the app's latest ledger entry is no reset.

    So it is when the table holds only its creation (version 0, no entry), or when the newest
    commit is the app's own entry of another kind: then it is the app's latest entry.
    """
    if newest is None:
        return version == 0
    return newest.meta.app_id == app_id and newest.meta.kind != "reset"


def pending_reset(spark: SparkSession, table: str, app_id: str) -> PendingReset | None:
    """The app's latest reset, if its ledger entry landed but a marker it moves did not.

    Every ingest start asks this. The table's newest commit often answers without a Spark job
    (`is_reset_ruled_out`); history is read only where it cannot.
    """
    require_table(spark, table)
    newest = latest_ledger_entry(spark, table)
    version = newest.version if newest is not None else table_version(spark, table)
    if is_reset_ruled_out(newest, version, app_id):
        return None
    entries = read_ledger(spark, table, app_id=app_id, limit=_RESET_LOOKBACK)
    if not entries or entries[0].meta.kind != "reset":
        return None
    latest = entries[0]
    to_batch = latest.meta.batch_id
    moved_from = latest.meta.source.get("from")
    forward = isinstance(moved_from, int) and to_batch > moved_from
    moves = recorded_moves(latest.meta.source)
    behind: list[tuple[Marker, int]] = []
    _, *followers = batch_markers(table, app_id)
    for marker in followers:
        if not table_exists(spark, marker.table):
            continue
        current = committed_batch(spark, marker.table, marker.txn_app_id)
        if moves is None:  # a reset recorded before the moves were: judged by the marker's level
            moved = is_marker_moved(current, to_batch, forward=forward)
        else:
            since = moves.get((marker.table, marker.txn_app_id))
            moved = since is None or has_reset_commit(spark, marker, app_id, latest.version, since)
        if not moved:
            behind.append((marker, current if current is not None else -1))
    if not behind:
        return None
    return PendingReset(table, app_id, to_batch, latest.version, tuple(behind))


def recorded_moves(source: Mapping[str, Any]) -> dict[tuple[str, str], int] | None:
    """The markers a reset's target entry says it moves, each with its table's version then.

    None for an entry written before resets recorded them.
    """
    moves = source.get("moves")
    if not isinstance(moves, list):
        return None
    return {(str(t), str(txn)): int(version) for t, txn, version in moves}


def has_reset_commit(
    spark: SparkSession, marker: Marker, app_id: str, reset_version: int, since: int
) -> bool:
    """True if `marker`'s table committed the reset at `reset_version` after its version `since`.

    Only the commits after `since` are read (the reset's own commit is one of them once done).
    """
    newer = table_version(spark, marker.table) - since
    if newer <= 0:
        return False
    return any(
        entry.meta.kind == "reset"
        and entry.meta.source.get("reset_version") == reset_version
        and entry.meta.source.get("marker") == marker.role
        for entry in read_ledger(spark, marker.table, app_id=app_id, limit=newer)
    )


def finish_reset(spark: SparkSession, pending: PendingReset) -> None:
    """Move the markers a half-done reset left behind, each in its own recorded commit."""
    for marker, _ in pending.behind:
        meta = admin_metadata(
            pending.app_id,
            pending.to_batch,
            "reset",
            {"kind": "reset", "marker": marker.role, "reset_version": pending.version},
        )
        commit_markers(spark, marker.table, {marker.txn_app_id: pending.to_batch}, meta)
        fault_point("mid_reset", pending.to_batch)


def reset_app(spark: SparkSession, table: str, app_id: str, to_batch: int) -> int:
    """Move every marker the app owns to exactly `to_batch`; return the target reset's version.

    After it, batches above `to_batch` are treated as new in all three tables (target,
    quarantine, audit record), and batches up to it as done, forward or back; `-1` means nothing
    is committed, so a fresh checkpoint may start again at batch 0. Order: the target's commit
    comes first and is the record of the intent (its ledger entry names every marker the reset
    moves, and, for the quarantine and audit markers not yet at `to_batch` in a table that
    exists, their table's version, after which their own reset commit is looked for); those
    follow, one commit each. A crash between them leaves a ledger entry whose markers are not
    all moved: `pending_reset` finds it, and a re-run of reset-app or the next ingest finishes it.
    """
    validate_app_id(app_id)
    require_table(spark, table)
    markers = batch_markers(table, app_id)
    elsewhere: list[tuple[Marker, int, int]] = []
    for marker in markers[1:]:
        if not table_exists(spark, marker.table):
            continue
        current = committed_batch(spark, marker.table, marker.txn_app_id)
        if (-1 if current is None else current) != to_batch:
            level = -1 if current is None else current
            elsewhere.append((marker, level, table_version(spark, marker.table)))
    meta = admin_metadata(
        app_id,
        to_batch,
        "reset",
        {
            "kind": "reset",
            "from": committed_batch(spark, table, app_id),
            "markers": [[m.table, m.txn_app_id] for m in markers],
            "moves": [[m.table, m.txn_app_id, version] for m, _, version in elsewhere],
        },
    )
    version = commit_markers(spark, table, {app_id: to_batch}, meta)
    fault_point("mid_reset", to_batch)
    behind = tuple((m, level) for m, level, _ in elsewhere)
    finish_reset(spark, PendingReset(table, app_id, to_batch, version, behind))
    return version
