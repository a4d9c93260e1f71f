"""`lakehouse verify`: exactly-once proven from the log and the tables alone.

Nothing here trusts a checkpoint or a process: it reads what the table's Delta log committed (the
markers, the ledger entries, every commit's operation) and what the target, quarantine and
quality tables hold, and checks them against each other:

- per app id, the ledger's batch ids have no gap up to the marker (a forward `reset-app` covers
  the batches it skipped);
- each batch reconciles: its ledger counts add up, the table holds exactly the rows it inserted
  and the quarantine exactly the rows it rejected (per app once admin commits rewrote batches);
- no commit changed data outside the ledger (a `DELETE` or `INSERT` run by hand);
- no record key appears twice (the full audit);
- on an upsert table, no row is older than a live tombstone of its key; on an SCD type 2
  table no version is valid across one, and each key's versions chain (one current at most);
- the quarantine and audit markers agree with the target's.

Each decision is a small pure function over what was read (`ingest.admin.verdict`);
`verify_table` does the reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.admin.verdict import Finding, Verdict, app_findings, is_outside_ledger, row_findings
from ingest.commit.history import broken_histories
from ingest.commit.tombstones import resurrected
from quality.audit import audit_table
from quality.marker_names import batch_markers
from tables.delta.history import history_rows, table_at
from tables.delta.ledger import ledger_entry_from_history
from tables.delta.markers import committed_batches, read_markers
from tables.delta.table import require_table, table_exists

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tables.spec import TableSpec


def verify_table(spark: SparkSession, spec: TableSpec, app_id: str | None = None) -> Verdict:
    """Read the log and the tables of `spec` and check them against each other."""
    require_table(spark, spec.name)
    verdict = Verdict(spec.name)
    # A pipeline may be committing while this reads (`verify` in a second shell). The quarantine
    # and audit markers are read first (the first is written before the target's commit, the
    # second after it, so each only gets further from its bound if the target moves on); the
    # target is then pinned at the version its markers were read at, and its history and rows
    # are read at that version.
    other_markers = {m.table: _markers(spark, m.table) for m in batch_markers(spec.name, "")[1:]}
    pinned = read_markers(spark, spec.name)
    markers = pinned.markers
    history = [
        row for row in history_rows(spark, spec.name, None) if int(row["version"]) <= pinned.version
    ]
    entries = [e for e in map(ledger_entry_from_history, history) if e is not None]
    apps = sorted({app_id} if app_id is not None else set(markers))
    verdict.apps = len(apps)
    oldest = min((int(r["version"]) for r in history), default=0)
    if oldest > 0:
        verdict.notes.append(
            f"the log keeps versions from {oldest} on: older batches are checked by their rows only"
        )
    for row in history:
        if is_outside_ledger(str(row["operation"]), row.get("userMetadata")):
            verdict.findings.append(
                Finding(
                    "outside_ledger",
                    f"version {row['version']} ({row['operation']}) changed the table without a "
                    "ledger entry",
                )
            )
    table_rows = _rows_by_batch(table_at(spark, spec.name, pinned.version))
    quarantine_rows = (
        _rows_by_batch(spark.table(spec.quarantine_name))
        if table_exists(spark, spec.quarantine_name)
        else {}
    )
    for app in apps:
        app_findings(spec, app, markers.get(app), entries, oldest, other_markers, verdict)
    verdict.findings.extend(
        f
        for f in row_findings(entries, table_rows, quarantine_rows)
        if app_id is None or f.app_id == app_id
    )
    back = resurrected(spark, spec, pinned.version, markers) if spec.merge == "upsert" else 0
    if back:
        verdict.findings.append(
            Finding(
                "resurrected",
                f"{back} row(s) are older than a live tombstone of their key: a delete did not "
                "hold",
            )
        )
    if spec.history == "scd2":
        broken = broken_histories(spec, table_at(spark, spec.name, pinned.version))
        if broken:
            verdict.findings.append(
                Finding(
                    "history",
                    f"{broken} key(s) have versions that overlap, or more or less than one "
                    "current row after their last delete",
                )
            )
    audit = audit_table(spark, spec)
    if audit.status == "failed":
        verdict.findings.append(
            Finding(
                "duplicate_keys",
                f"{audit.failing_keys} record key(s) appear more than once, e.g. "
                f"{', '.join(map(str, audit.sample_keys[:5]))}",
            )
        )
    return verdict


def _markers(spark: SparkSession, table: str) -> dict[str, int]:
    return committed_batches(spark, table) if table_exists(spark, table) else {}


def _rows_by_batch(table: DataFrame) -> dict[tuple[str, int], int]:
    rows = table.groupBy("_lh_app_id", "_lh_batch_id").count().collect()
    return {(str(app), int(batch)): int(n) for app, batch, n in rows}
