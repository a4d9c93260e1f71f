"""What happened to one batch: the report the runner and the CLI print, built from the log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from quality.check_results import CheckResult
from tables.delta.ledger import LedgerEntry

BatchStatus = Literal["committed", "skipped", "empty"]


@dataclass(frozen=True)
class BatchResult:
    """What happened to one batch, as reported to the stream runner and the CLI."""

    table: str
    app_id: str
    batch_id: int
    status: BatchStatus
    rows_read: int = 0
    rows_inserted: int = 0
    rows_already_present: int = 0
    rows_duplicate_in_batch: int = 0
    rows_quarantined: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    rows_ignored_older: int = 0
    """An upsert's versions not newer than the table's (`LedgerEntry.rows_ignored_older`)."""
    rows_after_horizon: int = 0
    """An upsert's versions at or below the tombstone horizon, for keys the table lacked."""
    is_upsert: bool = False
    version: int | None = None
    content_hash: str = ""
    attempts: int = 0
    note: str = ""
    checks: tuple[Mapping[str, Any], ...] = ()
    key_bounds: tuple[tuple[str, Any, Any], ...] = ()
    """Each key's (name, min, max) over the rows this process committed: the audit's scope."""
    read_version: int | None = None
    """The table version the commit read its marker from and audited its keys on."""
    audit: CheckResult | None = None
    """The duplicate audit decided before the commit (final if no commit landed in between)."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage: the commit's (`prepare`, `quarantine`, `audit`, `write`), then the
    stream runner's (`commit`, `audit_settle`, `outcomes_append`, `batch`); `ingest.timings`."""
    source: Mapping[str, Any] = field(default_factory=dict)
    """The source record of the batch's ledger entry (its files, or Kafka offset ranges)."""


def result_from_entry(
    entry: LedgerEntry, table: str, *, status: BatchStatus, attempts: int, note: str
) -> BatchResult:
    """Build the batch report from the ledger entry the log holds for it."""
    return BatchResult(
        table=table,
        app_id=entry.meta.app_id,
        batch_id=entry.meta.batch_id,
        status=status,
        rows_read=entry.meta.rows_read,
        rows_inserted=entry.rows_inserted if status == "committed" else 0,
        rows_already_present=entry.rows_already_present if status == "committed" else 0,
        rows_duplicate_in_batch=entry.rows_duplicate_in_batch if status == "committed" else 0,
        rows_quarantined=entry.meta.rows_quarantined if status == "committed" else 0,
        rows_updated=entry.rows_updated if status == "committed" else 0,
        rows_deleted=entry.rows_deleted if status == "committed" else 0,
        rows_ignored_older=entry.rows_ignored_older if status == "committed" else 0,
        rows_after_horizon=entry.rows_after_horizon if status == "committed" else 0,
        is_upsert=entry.meta.upsert is not None,
        version=entry.version,
        content_hash=entry.meta.content_hash,
        attempts=attempts,
        note=note,
        checks=entry.meta.checks,
        source=entry.meta.source,
    )
