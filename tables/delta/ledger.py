"""The ledger entry a lakehouse commit records in its userMetadata, and how it is read back.

Pure data: no Spark, no JVM. `tables.delta.commits` reads these entries from the table's log.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

LEDGER_FORMAT = 1
#: What an upsert batch's entry counts before its MERGE: `superseded` versions of a key older than
#: another version in the same batch, `after_tombstone` versions not newer than a delete already
#: recorded for the key, and the MERGE's source rows: `upserts` and `deletes`; of the upserts,
#: `after_horizon` versions at or below the tombstone horizon for a key the table lacked (a
#: forgotten delete's key may have come back: `ingest.commit.tombstones`). On an SCD type 2 table
#: `superseded` are versions the table already held at their sequence value, and the MERGE's
#: source rows are the history rows its versions and deletes change (`ingest.commit.history`),
#: counted as `HISTORY_ROWS`, a key only an SCD type 2 entry has.
UPSERT_COUNTS = ("superseded", "after_tombstone", "upserts", "deletes", "after_horizon")
HISTORY_ROWS = "history_rows"
CommitKind = Literal[
    "batch", "replay", "replace", "reset", "repair", "maintenance", "schema", "backfill"
]


@dataclass(frozen=True)
class CommitMetadata:
    """What a lakehouse commit records about its batch in the commit's userMetadata."""

    app_id: str
    batch_id: int
    source: Mapping[str, Any]
    rows_read: int
    rows_quarantined: int
    content_hash: str
    commit_token: str
    kind: CommitKind = "batch"
    checks: tuple[Mapping[str, Any], ...] = ()
    audit: Mapping[str, Any] | None = None
    """The batch's duplicate audit, decided before the commit on the version it read (`as_of`)."""
    upsert: Mapping[str, int] | None = None
    """An upsert batch's counts known before its MERGE (`UPSERT_COUNTS`); None for an insert."""

    def to_json(self) -> str:
        """Serialise to the compact JSON stored in the commit."""
        payload = {"lakehouse": LEDGER_FORMAT, **asdict(self)}
        payload["source"] = dict(self.source)
        payload["checks"] = [dict(c) for c in self.checks]
        for key in ("audit", "upsert"):
            value = getattr(self, key)
            if value is None:
                del payload[key]
            else:
                payload[key] = dict(value)
        return json.dumps(payload, separators=(",", ":"), sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> CommitMetadata | None:
        """Parse userMetadata written by this project; None for anything else."""
        if not text:
            return None
        try:
            payload = json.loads(text)
        except ValueError:
            return None
        if not isinstance(payload, dict) or payload.get("lakehouse") != LEDGER_FORMAT:
            return None
        return CommitMetadata(
            app_id=str(payload["app_id"]),
            batch_id=int(payload["batch_id"]),
            source=dict(payload.get("source") or {}),
            rows_read=int(payload.get("rows_read", 0)),
            rows_quarantined=int(payload.get("rows_quarantined", 0)),
            content_hash=str(payload.get("content_hash", "")),
            commit_token=str(payload.get("commit_token", "")),
            kind=payload.get("kind", "batch"),
            checks=tuple(dict(c) for c in payload.get("checks") or () if isinstance(c, dict)),
            audit=dict(payload["audit"]) if isinstance(payload.get("audit"), dict) else None,
            upsert=_upsert_counts(payload.get("upsert")),
        )


def _upsert_counts(value: object) -> dict[str, int] | None:
    """An entry's upsert counts: every `UPSERT_COUNTS` key (0 if absent), `HISTORY_ROWS` if
    recorded."""
    if not isinstance(value, dict):
        return None
    kept = (*UPSERT_COUNTS, HISTORY_ROWS) if HISTORY_ROWS in value else UPSERT_COUNTS
    return {k: int(value.get(k, 0)) for k in kept}


@dataclass(frozen=True)
class LedgerEntry:
    """One committed batch as the log shows it: its metadata plus the commit's own metrics."""

    version: int
    committed_at: datetime
    operation: str
    meta: CommitMetadata
    rows_merged: int
    rows_inserted: int
    metrics: Mapping[str, str] = field(default_factory=dict)

    @property
    def rows_already_present(self) -> int:
        """Rows of the batch the MERGE found in the table already (a replay, a retried write).

        An upsert finds rows on purpose: those are `rows_updated`, or ignored as older.
        """
        if self.meta.upsert is not None:
            return 0
        return self.rows_merged - self.rows_inserted

    @property
    def rows_duplicate_in_batch(self) -> int:
        """Valid rows dropped because another row of the same batch had the same record key
        (for an upsert: the same key and sequence value)."""
        counts = self.meta.upsert
        if counts is None:
            return self.meta.rows_read - self.meta.rows_quarantined - self.rows_merged
        # Every landing version is counted once: dropped before the MERGE, or placed by it (an
        # SCD type 2 MERGE's rows are the history's changes, not one per version).
        placed = sum(counts[k] for k in ("superseded", "after_tombstone", "upserts", "deletes"))
        return self.meta.rows_read - self.meta.rows_quarantined - placed

    @property
    def rows_updated(self) -> int:
        """Rows of an upsert that replaced an older version of their key."""
        return int(self.metrics.get("numTargetRowsUpdated", "0"))

    @property
    def rows_deleted(self) -> int:
        """Keys an upsert's delete rule removed (a repair's or replace's deletes for the others)."""
        return int(self.metrics.get("numTargetRowsDeleted", "0"))

    @property
    def rows_ignored_older(self) -> int:
        """Versions of an upsert that were not newer than the version the table held or the
        batch also carried, and deletes that found no older version of their key to remove."""
        counts = self.meta.upsert
        if counts is None:
            return 0
        applied = self.rows_inserted + self.rows_updated + self.rows_deleted
        return counts["superseded"] + counts["after_tombstone"] + self.rows_merged - applied

    @property
    def rows_after_horizon(self) -> int:
        """Versions of an upsert at or below its table's tombstone horizon, for keys the table
        lacked: each may be a key whose delete expired, back."""
        return 0 if self.meta.upsert is None else self.meta.upsert.get("after_horizon", 0)

    def as_row(self) -> dict[str, Any]:
        """Flatten for display and export."""
        return {
            "app_id": self.meta.app_id,
            "batch_id": self.meta.batch_id,
            "version": self.version,
            "kind": self.meta.kind,
            "rows_read": self.meta.rows_read,
            "rows_inserted": self.rows_inserted,
            "rows_already_present": self.rows_already_present,
            "rows_updated": self.rows_updated,
            "rows_deleted": self.rows_deleted,
            "rows_ignored_older": self.rows_ignored_older,
            "rows_after_horizon": self.rows_after_horizon,
            "rows_duplicate_in_batch": self.rows_duplicate_in_batch,
            "rows_quarantined": self.meta.rows_quarantined,
            "source": describe_source(self.meta.source),
            "content_hash": self.meta.content_hash,
            "committed_at": self.committed_at.isoformat(sep=" ", timespec="seconds"),
        }


def admin_metadata(
    app_id: str, batch_id: int, kind: CommitKind, source: Mapping[str, Any]
) -> CommitMetadata:
    """The ledger entry of an operator's commit (reset, repair, replay) or a run's upkeep
    (maintenance): no rows read by it."""
    return CommitMetadata(
        app_id=app_id,
        batch_id=batch_id,
        source=source,
        rows_read=0,
        rows_quarantined=0,
        content_hash="",
        commit_token=uuid.uuid4().hex,
        kind=kind,
    )


def recorded_offsets(source: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Kafka offset ranges a batch's source record holds, or None for other sources."""
    offsets = source.get("offsets")
    return offsets if source.get("kind") == "kafka" and isinstance(offsets, Mapping) else None


def describe_source(source: Mapping[str, Any]) -> str:
    """A short human description of a batch's source record."""
    offsets = recorded_offsets(source)
    if offsets is not None:
        return "kafka: " + "; ".join(
            f"{topic} p{partition} {bounds[0]}-{bounds[1]}"
            for topic, partitions in sorted(offsets.items())
            for partition, bounds in sorted(partitions.items(), key=lambda kv: int(kv[0]))
        )
    backfilled = source.get("backfilled")
    if isinstance(backfilled, Mapping):
        return f"backfilled {backfilled.get('rows')} row(s) of {backfilled.get('column')}"
    for key in ("added_columns", "widened_columns"):
        changed = source.get(key)
        if isinstance(changed, Mapping):
            label = key.replace("_", " ")
            return f"{label}: " + ", ".join(f"{name} {kind}" for name, kind in changed.items())
    if source.get("type_widening") == "enabled":
        return "type widening enabled"
    files = source.get("files")
    if isinstance(files, list):
        shown = ", ".join(str(f).rsplit("/", 1)[-1] for f in files[:3])
        more = f" (+{len(files) - 3} more)" if len(files) > 3 else ""
        return f"{source.get('format', 'files')}: {shown}{more}"
    return json.dumps(dict(source), sort_keys=True)


def ledger_entry_from_history(row: Mapping[str, Any]) -> LedgerEntry | None:
    """Build a ledger entry from one `DESCRIBE HISTORY` row, or None if not ours."""
    meta = CommitMetadata.from_json(row.get("userMetadata"))
    if meta is None:
        return None
    metrics: dict[str, str] = dict(row.get("operationMetrics") or {})
    inserted = int(metrics.get("numTargetRowsInserted", metrics.get("numOutputRows", "0")))
    return LedgerEntry(
        version=int(row["version"]),
        committed_at=row["timestamp"],
        operation=str(row["operation"]),
        meta=meta,
        rows_merged=int(metrics.get("numSourceRows", inserted)),
        rows_inserted=inserted,
        metrics=metrics,
    )
