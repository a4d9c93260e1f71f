"""After a batch's commit: its audit settled, the audit policy applied, the outcomes kept.

The commit decides the duplicate audit before it writes, on the table version it read, and
carries the outcome in its ledger entry (`ingest.commit`). Here, after the commit, that outcome
stands if no other commit landed in between, and is redone on the committed table otherwise; the
policy (`warn`, `fail`, `repair`) acts on it; and the outcomes go to `lakehouse_quality` through a
`ResultLog`, in bulk. A run that stopped before an append left its outcomes in the ledger:
`recover_outcomes` appends them before the next run's stream starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.decisions import is_audit_final
from quality.audit import audit_commit, repair_duplicates, should_hold, should_repair
from quality.check_results import (
    CheckResult,
    ResultLog,
    audit_from_entry,
    checks_from_ledger,
    held_by,
)
from quality.marker_names import batch_markers
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batch
from tables.delta.table import table_exists
from tables.errors import DuplicatesFoundError
from tables.faults import fault_point

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.commit.batch_result import BatchResult
    from tables.delta.ledger import LedgerEntry
    from tables.delta.writer import TableWriter
    from tables.spec import TableSpec


def audit_after_commit(
    writer: TableWriter, result: BatchResult, outcomes: ResultLog | None = None
) -> list[CheckResult]:
    """Settle a committed batch's audit, apply the audit policy, and keep the outcomes.

    The audit decided before the commit stands when no other commit landed between the version
    it read and the batch's own; otherwise the batch's keys are audited again on the table as
    committed. The outcomes (with the batch's expectation outcomes, carried in its ledger entry)
    go to `outcomes`, which appends them to `lakehouse_quality` in bulk and at once when one
    failed; without it they are appended now. A batch this run skipped was committed by an
    earlier run, whose outcomes `recover_outcomes` appends at start; an empty batch's commit
    (its marker and ledger entry only) has an audit of nothing, kept like any other. Under the
    `fail` policy a finding raises DuplicatesFoundError after it is recorded.
    """
    if result.status == "skipped":
        return []
    spark, spec = writer.spark, writer.spec
    fault_point("before_audit", result.batch_id)
    audit = result.audit
    if (
        audit is None
        or result.read_version is None
        or not is_audit_final(result.read_version, result.version)
    ):
        audit = None
    if audit is None:
        bounds = {key: (low, high) for key, low, high in result.key_bounds} or None
        audit = audit_commit(writer, result.batch_id, result.version, bounds)
    results = [
        audit,
        *checks_from_ledger(
            spec.name, result.app_id, result.batch_id, result.version, result.checks
        ),
    ]
    if should_repair(audit):
        results.append(repair_duplicates(spark, spec, audit, writer.clones))
    _keep(writer, result.batch_id, results, outcomes)
    if should_hold(audit):
        raise DuplicatesFoundError(held_message(spec.name, audit.as_row()))
    return results


def _keep(
    writer: TableWriter, batch_id: int, results: list[CheckResult], outcomes: ResultLog | None
) -> None:
    if outcomes is None:
        outcomes = outcomes_of(writer.spark, writer.spec, writer.app_id)
        outcomes.add(batch_id, results)
        outcomes.flush()
    else:
        outcomes.add(batch_id, results)


def outcomes_of(spark: SparkSession, spec: TableSpec, app_id: str) -> ResultLog:
    """The buffer that appends an app's outcomes for `spec` to `lakehouse_quality`."""
    return ResultLog(spark, batch_markers(spec.name, app_id)[2].txn_app_id)


def recover_outcomes(writer: TableWriter, outcomes: ResultLog) -> list[CheckResult]:
    """Keep the outcomes of committed batches that `lakehouse_quality` lacks; return them.

    A run that stopped between a commit and the append of its outcomes left them in the batches'
    ledger entries: the batches above the audit marker up to the target's marker are read back
    from the ledger, a batch whose audit was not final (or that carries none) is audited again,
    and everything is appended before the stream starts.
    """
    spark, spec, app_id = writer.spark, writer.spec, writer.app_id
    target = committed_batch(spark, spec.name, app_id)
    audit_marker = batch_markers(spec.name, app_id)[2]
    recorded = (
        committed_batch(spark, audit_marker.table, audit_marker.txn_app_id)
        if table_exists(spark, audit_marker.table)
        else None
    )
    missing = unrecorded_batches(recorded, target)
    if not missing:
        return []
    entries = _batch_entries(spark, spec.name, app_id, missing)
    kept: list[CheckResult] = []
    for batch_id in sorted(missing):
        entry = entries.get(batch_id)
        version = entry.version if entry is not None else None
        carried = entry.meta.audit if entry is not None else None
        if (
            entry is not None
            and carried is not None
            and is_audit_final(int(carried.get("as_of", -2)), entry.version)
        ):
            audit = audit_from_entry(
                spec.name, app_id, batch_id, entry.version, carried, spec.audit_policy
            )
        else:
            audit = audit_commit(writer, batch_id, version)
        checks = entry.meta.checks if entry is not None else ()
        results = [audit, *checks_from_ledger(spec.name, app_id, batch_id, version, checks)]
        if should_repair(audit):
            results.append(repair_duplicates(spark, spec, audit, writer.clones))
        outcomes.add(batch_id, results)
        kept.extend(results)
    outcomes.flush()
    return kept


def unrecorded_batches(recorded: int | None, committed: int | None) -> list[int]:
    """The batch ids above the audit marker up to the target's marker: outcomes not yet kept."""
    if committed is None or committed < 0:
        return []
    return list(range((recorded if recorded is not None else -1) + 1, committed + 1))


def _batch_entries(
    spark: SparkSession, table: str, app_id: str, batch_ids: list[int]
) -> dict[int, LedgerEntry]:
    """The stream ledger entries of `batch_ids`, searching deeper into history until all found."""
    wanted = set(batch_ids)
    found: dict[int, LedgerEntry] = {}
    for limit in (64, 1024, None):
        for entry in read_ledger(spark, table, app_id=app_id, limit=limit):
            if entry.meta.kind == "batch" and entry.meta.batch_id in wanted:
                found.setdefault(entry.meta.batch_id, entry)
        if wanted <= found.keys():
            break
    return found


def held_message(table: str, finding: dict[str, Any]) -> str:
    """The one-line error for a table held by a duplicate finding under the `fail` policy."""
    samples = ", ".join(finding.get("sample_keys") or [])
    return (
        f"table {table} holds {finding['failing_keys']} record key(s) twice (e.g. {samples}), "
        f"found by the audit of batch {finding['batch_id']} of app id {finding['app_id']!r}; its "
        f"audit policy is fail, so ingestion is held: run `lakehouse check {table} --full "
        "--repair` to delete the later copies, or fix the table and run `lakehouse check "
        f"{table} --full`"
    )


def assert_not_held(spark: SparkSession, spec: TableSpec) -> None:
    """Raise DuplicatesFoundError if the table's latest duplicate audit holds it."""
    finding = held_by(spark, spec.name)
    if finding is not None:
        raise DuplicatesFoundError(held_message(spec.name, finding))
