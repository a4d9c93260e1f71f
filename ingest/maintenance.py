"""Scheduled upkeep inside a long run: OPTIMIZE and VACUUM after batches, each in the ledger.

`[tables.X.maintenance]` says when (`tables.maintenance_policy`); `Upkeep`, one per run, does it
in the batch function, after the batch committed and its audit settled and before Spark
checkpoints the batch (a long VACUUM delays that checkpoint, and a stop waits for it). The run
holds its checkpoint, so no batch of this pipeline commits meanwhile. Another app's may: an
OPTIMIZE is checked against it as any concurrent commit is, and a MERGE that read files the
OPTIMIZE replaced loses (Delta's ConcurrentDeleteReadException), which its commit retries as a
conflict. The markers and the rows stay as they were: OPTIMIZE rewrites files, VACUUM deletes
only files no version within the retention needs.

Each operation that commits carries a ledger entry of kind `maintenance` (app id, the batch it
followed, the operation), so `history` shows it beside the batches. An OPTIMIZE with nothing to
compact, or a VACUUM with nothing to delete, commits nothing and records nothing. A failed
operation is reported and the run goes on: the batch has committed, and the upkeep comes round
again at its next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
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
    """One upkeep operation a run did (or tried) after a batch, as the run reports it."""

    table: str
    batch_id: int
    operation: Operation
    detail: str
    failed: bool = False

    def describe(self) -> str:
        """One line for the run's output."""
        return f"after batch {self.batch_id}: {self.operation} {self.table}: {self.detail}"


class Upkeep:
    """A run's upkeep of its table: what is due after each batch, and what the last
    compaction left (so `optimize_max_files` counts the files added since, not the table's
    own floor: a table of more partitions than the limit is not compacted after every batch)."""

    def __init__(self) -> None:
        self.compacted_to = 0

    def after(self, writer: TableWriter, batch_id: int) -> list[MaintenanceRun]:
        """Run the upkeep due after `batch_id`; what was done or failed, never raised.

        The batch has committed, and a compaction that loses to a concurrent writer, or a store
        that answers slowly, must not stop the ingestion.
        """
        name, policy = writer.spec.name, writer.spec.maintenance
        if not policy.is_on:
            return []
        try:
            fault_point("before_maintenance", batch_id)
            files = table_detail(writer.spark, name).num_files if policy.watches_files else 0
        except Exception as exc:
            return [MaintenanceRun(name, batch_id, "optimize", _failed(exc), failed=True)]
        done: list[MaintenanceRun] = []
        if should_optimize(policy, batch_id, files - self.compacted_to):
            done.append(_attempt(name, batch_id, "optimize", partial(self._optimize, writer)))
        if should_vacuum(policy, batch_id):
            done.append(_attempt(name, batch_id, "vacuum", partial(_vacuum, writer)))
        return done

    def _optimize(self, writer: TableWriter, batch_id: int) -> str:
        entry = _entry(writer, batch_id, "optimize")
        report = optimize(writer.spark, writer.spec.name, meta=entry, clones=writer.clones)
        self.compacted_to = report.files_after
        return f"{report.files_before} files before, {report.files_after} after"


def _attempt(
    table: str, batch_id: int, operation: Operation, run: Callable[[int], str]
) -> MaintenanceRun:
    try:
        return MaintenanceRun(table, batch_id, operation, run(batch_id))
    except Exception as exc:
        return MaintenanceRun(table, batch_id, operation, _failed(exc), failed=True)


def _vacuum(writer: TableWriter, batch_id: int) -> str:
    removed = vacuum(
        writer.spark,
        writer.spec.name,
        retain_hours=None,
        replay_window=writer.spec.replay_window,
        meta=_entry(writer, batch_id, "vacuum"),
        clones=writer.clones,
    )
    return (
        f"removed {len(removed.files)} path(s), {removed.size_bytes} bytes "
        f"(retention {removed.retain_hours:g} h)"
    )


def _failed(exc: BaseException) -> str:
    return f"failed, tried again at its next turn: {error_summary(exc)}"


def _entry(writer: TableWriter, batch_id: int, operation: Operation) -> CommitMetadata:
    """The ledger entry of an upkeep commit: the app, the batch it followed, the operation."""
    return admin_metadata(
        writer.app_id, batch_id, "maintenance", {"kind": "maintenance", "operation": operation}
    )
