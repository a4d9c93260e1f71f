"""What `lakehouse verify` concludes, as pure decisions over what it read (`ingest.admin.verify`).

The findings and their kinds, the verdict, and the rules: per app id no ledger gap up to the
marker, each batch entry's counts reconcile, no commit changed rows outside the ledger, each
batch's rows in the table and quarantine match its entries, the quarantine and audit markers
agree with the target's. No Spark here: each rule is tested on plain values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from quality.marker_names import batch_markers
from tables.delta.ledger import HISTORY_ROWS, LedgerEntry

if TYPE_CHECKING:
    from tables.spec import TableSpec

FindingKind = Literal[
    "ledger_gap",
    "unreconciled",
    "table_rows",
    "quarantine_rows",
    "outside_ledger",
    "duplicate_keys",
    "marker",
    "resurrected",
    "history",
]
#: Operations that change no row: a commit of these without a ledger entry is no finding.
_NO_DATA_CHANGE = frozenset(
    {
        "CREATE TABLE",
        "CREATE OR REPLACE TABLE",
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "ADD COLUMNS",
        "CHANGE COLUMN",
        "UPGRADE PROTOCOL",
        "SET TRANSACTION",
        "MANUAL UPDATE",
    }
)


@dataclass(frozen=True)
class Finding:
    """One thing the log and the tables disagree on, with where it is."""

    kind: FindingKind
    detail: str
    app_id: str | None = None
    batch_id: int | None = None

    def as_row(self) -> dict[str, Any]:
        """Flatten for display and export."""
        return {
            "finding": self.kind,
            "app_id": self.app_id,
            "batch_id": self.batch_id,
            "detail": self.detail,
        }


@dataclass
class Verdict:
    """What `verify` found for one table: findings fail it, notes only inform."""

    table: str
    apps: int = 0
    batches: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when nothing disagrees."""
        return not self.findings


def ledger_gaps(marker: int, batch_ids: Iterable[int], reset_to: Iterable[int]) -> list[int]:
    """Batch ids from 0 to the marker that no batch entry records and no forward reset skipped."""
    covered = set(batch_ids)
    skipped_to = max(reset_to, default=-1)
    return [b for b in range(marker + 1) if b not in covered and b > skipped_to]


def is_reconciled(entry: LedgerEntry) -> bool:
    """True if a batch entry's counts add up: read = inserted + present + copies + quarantined.

    An upsert's: read = inserted + updated + deleted + ignored as older + copies + quarantined,
    where its MERGE's source rows are the upserts and deletes it recorded, the inserts and
    updates at most its upserts, the deletes at most its deletes. An SCD type 2 entry's MERGE
    source rows are the history rows it recorded changing, each applied at most once.
    """
    counts = entry.meta.upsert
    if counts is not None and HISTORY_ROWS in counts:  # SCD type 2: its history's changes
        applied = entry.rows_inserted + entry.rows_updated + entry.rows_deleted
        return (
            entry.rows_merged == counts[HISTORY_ROWS]
            and applied <= entry.rows_merged
            and entry.rows_duplicate_in_batch >= 0
        )
    if counts is not None:
        source = counts["upserts"] + counts["deletes"]
        return (
            entry.rows_merged == source
            and entry.rows_inserted + entry.rows_updated <= counts["upserts"]
            and entry.rows_deleted <= counts["deletes"]
            and entry.rows_duplicate_in_batch >= 0
        )
    return entry.rows_already_present >= 0 and entry.rows_duplicate_in_batch >= 0


def is_outside_ledger(operation: str, user_metadata: str | None) -> bool:
    """True for a commit that may change rows but carries no ledger entry."""
    return not user_metadata and operation.upper() not in _NO_DATA_CHANGE


def marker_findings(
    app_id: str, target: int, quarantine: int | None, audit: int | None, rejecting: set[int]
) -> tuple[list[Finding], list[str]]:
    """Check an app's quarantine and audit markers against its target marker.

    The quarantine append runs before the write and only for batches with rejected rows, so its
    marker is at most one above the target's (a crash between the two, finished by the next
    run) and, when not above, names a batch that rejected rows. Outcomes are appended in bulk,
    so the audit marker may lag the target's (the next run appends the rest), never lead it.
    """
    findings: list[Finding] = []
    notes: list[str] = []
    if quarantine is not None:
        if quarantine > target + 1:
            findings.append(
                Finding(
                    "marker",
                    f"the quarantine marker is {quarantine}, above the target's {target} + 1",
                    app_id,
                    quarantine,
                )
            )
        elif quarantine == target + 1:
            notes.append(
                f"{app_id}: batch {quarantine}'s rejected rows are in quarantine and its write is "
                "not: the next run of the pipeline completes it"
            )
        elif quarantine not in rejecting:
            findings.append(
                Finding(
                    "marker",
                    f"the quarantine marker names batch {quarantine}, whose ledger entry "
                    "rejected no row",
                    app_id,
                    quarantine,
                )
            )
    if audit is not None and audit > target:
        findings.append(
            Finding(
                "marker",
                f"the audit record's marker is {audit}, above the target's {target}",
                app_id,
                audit,
            )
        )
    elif (audit if audit is not None else -1) < target:
        notes.append(
            f"{app_id}: outcomes of batches after {audit if audit is not None else 'none'} are "
            f"in the ledger, not yet in lakehouse_quality (the next run appends them)"
        )
    return findings, notes


def row_findings(
    entries: Sequence[LedgerEntry],
    table_rows: Mapping[tuple[str, int], int],
    quarantine_rows: Mapping[tuple[str, int], int],
) -> list[Finding]:
    """Per batch, the rows the table and quarantine hold against what its entries say landed.

    Batches an admin commit rewrote (replay, replace, repair) are compared per app instead: a
    replace deletes rows and a repair deletes copies across batches. A batch committed again
    after `reset-app` has two entries, the second inserting only what the first did not: the
    table holds what all of them inserted.
    """
    findings: list[Finding] = []
    # A maintenance entry (OPTIMIZE, VACUUM) rewrites files, never rows: its batch is checked.
    admin = {
        (e.meta.app_id, e.meta.batch_id)
        for e in entries
        if e.meta.kind not in ("batch", "maintenance", "schema", "backfill")
    }
    repaired = any(e.meta.kind == "repair" for e in entries)
    latest: dict[tuple[str, int], LedgerEntry] = {}
    inserted: dict[tuple[str, int], int] = {}
    for entry in sorted(entries, key=lambda e: e.version):
        if entry.meta.kind == "batch":
            batch = (entry.meta.app_id, entry.meta.batch_id)
            latest[batch] = entry
            inserted[batch] = inserted.get(batch, 0) + entry.rows_inserted
    for (app_id, batch_id), entry in sorted(latest.items()):
        if (app_id, batch_id) in admin or repaired:
            continue
        held = table_rows.get((app_id, batch_id), 0)
        expected = inserted[(app_id, batch_id)]
        # An upsert's rows move to the batch that last changed their key, or are deleted.
        if entry.meta.upsert is None and held != expected:
            findings.append(
                Finding(
                    "table_rows",
                    f"the table holds {held} row(s) of the batch, its ledger entries inserted "
                    f"{expected}",
                    app_id,
                    batch_id,
                )
            )
        rejected = quarantine_rows.get((app_id, batch_id), 0)
        if rejected != entry.meta.rows_quarantined:
            findings.append(
                Finding(
                    "quarantine_rows",
                    f"the quarantine holds {rejected} row(s) of the batch, its ledger entry "
                    f"rejected {entry.meta.rows_quarantined}",
                    app_id,
                    batch_id,
                )
            )
    return findings


def app_findings(
    spec: TableSpec,
    app_id: str,
    marker: int | None,
    entries: Sequence[LedgerEntry],
    oldest: int,
    other_markers: Mapping[str, Mapping[str, int]],
    verdict: Verdict,
) -> None:
    """Add one app id's findings to `verdict`: ledger gaps, unreconciled entries, markers."""
    mine = [e for e in entries if e.meta.app_id == app_id]
    batches = [e for e in mine if e.meta.kind == "batch"]
    verdict.batches += len({e.meta.batch_id for e in batches})
    if marker is None:
        verdict.findings.append(
            Finding("marker", "the ledger has entries but the table holds no marker", app_id)
        )
        return
    resets = [e.meta.batch_id for e in mine if e.meta.kind == "reset"]
    gaps = ledger_gaps(marker, (e.meta.batch_id for e in batches), resets)
    if oldest > 0 and batches:
        gaps = [b for b in gaps if b > min(e.meta.batch_id for e in batches)]
    if gaps:
        verdict.findings.append(
            Finding(
                "ledger_gap",
                f"the marker is {marker} but no ledger entry records batch(es) {_ranges(gaps)}",
                app_id,
                gaps[0],
            )
        )
    verdict.findings.extend(
        Finding("unreconciled", _unreconciled(e), app_id, e.meta.batch_id)
        for e in batches
        if not is_reconciled(e)
    )
    _, quarantine, audit = batch_markers(spec.name, app_id)
    found, notes = marker_findings(
        app_id,
        marker,
        other_markers[quarantine.table].get(quarantine.txn_app_id),
        other_markers[audit.table].get(audit.txn_app_id),
        {e.meta.batch_id for e in batches if e.meta.rows_quarantined > 0},
    )
    verdict.findings.extend(found)
    verdict.notes.extend(notes)


def _unreconciled(entry: LedgerEntry) -> str:
    counts = entry.meta.upsert
    if counts is not None:
        return (
            f"upsert counts disagree: MERGE source {entry.rows_merged} rows, recorded "
            f"{counts['upserts']} upserts + {counts['deletes']} deletes; inserted "
            f"{entry.rows_inserted}, updated {entry.rows_updated}, deleted {entry.rows_deleted}"
        )
    return (
        f"read {entry.meta.rows_read} != inserted {entry.rows_inserted} + already present "
        f"{entry.rows_already_present} + copies {entry.rows_duplicate_in_batch} + quarantined "
        f"{entry.meta.rows_quarantined}"
    )


def _ranges(ids: Sequence[int]) -> str:
    """`[0, 1, 2, 5]` -> `0-2, 5`."""
    parts: list[str] = []
    start = previous = ids[0]
    for b in [*ids[1:], None]:
        if b is not None and b == previous + 1:
            previous = b
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if b is not None:
            start = previous = b
    return ", ".join(parts)
