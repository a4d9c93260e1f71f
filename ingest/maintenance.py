"""Scheduled upkeep inside a long run: OPTIMIZE and VACUUM between batches, each in the ledger.

`[tables.X.maintenance]` says when (`tables.maintenance_policy`); this module does it, in the
batch function, after the batch committed and its audit settled. The stream is then between
batches and the run holds its checkpoint, so no batch of this pipeline commits meanwhile; another
app's batch may, and Delta checks an OPTIMIZE against it as against any concurrent commit (a
compaction never conflicts with a blind append). The markers and the rows stay as they were:
OPTIMIZE rewrites files, VACUUM deletes only files no version within the retention needs.

Each run that commits carries a ledger entry of kind `maintenance` (app id, the batch it followed,
the operation), so `history` shows it beside the batches. An OPTIMIZE with nothing to compact
commits nothing, and so records nothing. A failed operation is reported and the run goes on: the
batch has committed, and the upkeep comes round again at its next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tables.delta.ledger import admin_metadata
from tables.delta.maintenance import optimize, vacuum
from tables.delta.table import table_detail
from tables.errors import error_summary
from tables.faults import fault_point
from tables.maintenance_policy import should_optimize, should_vacuum

if TYPE_CHECKING:
    from tables.delta.ledger import CommitMetadata
    from tables.delta.writer import TableWriter

Operation = Literal["optimize", "vacuum"]


@dataclass(frozen=True)
class MaintenanceRun:
    """One upkeep operation a run did after a batch, as the run reports it."""

    table: str
    batch_id: int
    operation: Operation
    detail: str
    failed: bool = False

    def describe(self) -> str:
        """One line for the run's output."""
        return f"after batch {self.batch_id}: {self.operation} {self.table}: {self.detail}"


def maintain(writer: TableWriter, batch_id: int) -> list[MaintenanceRun]:
    """Run the upkeep due after `batch_id` under the table's policy; what was done or failed.

    An operation that fails is reported (`failed`), never raised: the batch has committed, and
    a compaction that loses to a concurrent writer, or a store that answers slowly, must not
    stop the ingestion. The next turn tries again.
    """
    spec, spark = writer.spec, writer.spark
    policy = spec.maintenance
    if not policy.is_on:
        return []
    done: list[MaintenanceRun] = []
    try:
        fault_point("before_maintenance", batch_id)
        files = table_detail(spark, spec.name).num_files if policy.watches_files else None
    except Exception as exc:
        return [MaintenanceRun(spec.name, batch_id, "optimize", _failed(exc), failed=True)]
    if should_optimize(policy, batch_id, files):
        done.append(_attempt(spec.name, batch_id, "optimize", lambda: _optimize(writer, batch_id)))
    if should_vacuum(policy, batch_id):
        done.append(_attempt(spec.name, batch_id, "vacuum", lambda: _vacuum(writer, batch_id)))
    return done


def _attempt(
    table: str, batch_id: int, operation: Operation, run: Callable[[], str]
) -> MaintenanceRun:
    try:
        return MaintenanceRun(table, batch_id, operation, run())
    except Exception as exc:
        return MaintenanceRun(table, batch_id, operation, _failed(exc), failed=True)


def _failed(exc: BaseException) -> str:
    return f"failed, tried again at its next turn: {error_summary(exc)}"


def _optimize(writer: TableWriter, batch_id: int) -> str:
    report = optimize(writer.spark, writer.spec.name, meta=_entry(writer, batch_id, "optimize"))
    return f"{report.files_before} files before, {report.files_after} after"


def _vacuum(writer: TableWriter, batch_id: int) -> str:
    removed = vacuum(
        writer.spark,
        writer.spec.name,
        retain_hours=None,
        replay_window=writer.spec.replay_window,
        meta=_entry(writer, batch_id, "vacuum"),
    )
    return (
        f"removed {len(removed.files)} path(s), {removed.size_bytes} bytes "
        f"(retention {removed.retain_hours:g} h)"
    )


def _entry(writer: TableWriter, batch_id: int, operation: Operation) -> CommitMetadata:
    """The ledger entry of an upkeep commit: the app, the batch it followed, the operation."""
    return admin_metadata(
        writer.app_id, batch_id, "maintenance", {"kind": "maintenance", "operation": operation}
    )
