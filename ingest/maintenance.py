"""Scheduled upkeep inside a long run: OPTIMIZE and VACUUM after batches, each in the ledger.

`[tables.X.maintenance]` says when (`tables.maintenance_policy`); `Upkeep`, one per run, does it
in the batch function, after the batch committed and its audit settled and before Spark
checkpoints the batch (a long VACUUM delays that checkpoint, and a stop waits for it). The run
holds its checkpoint, so no batch of this pipeline commits meanwhile. Another app's may: an
OPTIMIZE is checked against it as any concurrent commit is, and a MERGE that read files the
OPTIMIZE replaced loses (Delta's ConcurrentDeleteReadException), which its commit retries as a
conflict. The markers and the rows stay as they were: OPTIMIZE rewrites files, VACUUM deletes
only files no version within the retention needs.

The run's companion tables, its quarantine, an upsert table's tombstones and the database's
quality table, grow with the batches too: at the same turns they are compacted (once past a few
files) and vacuumed. At its VACUUM turn an upsert table also expires the tombstones older than
its `tombstone_retention` (`ingest.commit.tombstones`).

Each operation that commits carries a ledger entry of kind `maintenance` (app id, the batch it
followed, the operation), so `history` shows it beside the batches. An OPTIMIZE with nothing to
compact, or a VACUUM with nothing to delete, commits nothing and records nothing. A failed
operation is reported and the run goes on: the batch has committed, and the upkeep comes round
again at its next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Literal

from ingest.commit.tombstones import expire_tombstones
from quality.check_results import quality_table_name
from tables.delta.ledger import admin_metadata
from tables.delta.maintenance import optimize, vacuum
from tables.delta.table import table_detail, table_exists
from tables.errors import error_summary
from tables.faults import fault_point
from tables.maintenance_policy import (
    is_every_nth,
    should_compact_companion,
    should_optimize,
    should_vacuum,
)

if TYPE_CHECKING:
    from tables.delta.ledger import CommitMetadata
    from tables.delta.maintenance import OptimizeReport
    from tables.delta.writer import TableWriter

Operation = Literal["optimize", "vacuum", "expire_tombstones"]


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
            done.append(_attempt(name, batch_id, "vacuum", partial(_vacuum, writer, name)))
            if writer.spec.merge == "upsert":
                expire = partial(_expire, writer)
                tombstones = writer.spec.tombstones_name
                done.append(_attempt(tombstones, batch_id, "expire_tombstones", expire))
        for companion in companions(writer):
            done.extend(_companion_upkeep(writer, companion, batch_id))
        return done

    def _optimize(self, writer: TableWriter, batch_id: int) -> str:
        report = _compact(writer, writer.spec.name, batch_id)
        self.compacted_to = report.files_after
        return _compacted(report)


def companions(writer: TableWriter) -> list[str]:
    """The tables a run appends to beside its own: its quarantine, an upsert table's tombstones,
    the database's quality table (shared by every table of the database: another run's upkeep
    may compact it meanwhile, and the loser's OPTIMIZE fails and comes round again)."""
    spec = writer.spec
    upsert = [spec.tombstones_name] if spec.merge == "upsert" else []
    return [spec.quarantine_name, *upsert, quality_table_name(spec.name)]


def _companion_upkeep(writer: TableWriter, table: str, batch_id: int) -> list[MaintenanceRun]:
    """Compact and vacuum a companion table at the run's own turns; appends to it commute with
    both (an OPTIMIZE conflicts only with a commit that removed the files it read)."""
    policy = writer.spec.maintenance
    due_vacuum = should_vacuum(policy, batch_id)
    if not (is_every_nth(batch_id, policy.optimize_every) or due_vacuum):
        return []
    try:
        if not table_exists(writer.spark, table):
            return []
        files = table_detail(writer.spark, table).num_files
    except Exception as exc:
        return [MaintenanceRun(table, batch_id, "optimize", _failed(exc), failed=True)]
    done: list[MaintenanceRun] = []
    if should_compact_companion(policy, batch_id, files):
        compact = partial(_compact, writer, table)
        done.append(_attempt(table, batch_id, "optimize", lambda b: _compacted(compact(b))))
    if due_vacuum:
        done.append(_attempt(table, batch_id, "vacuum", partial(_vacuum, writer, table)))
    return done


def _compact(writer: TableWriter, table: str, batch_id: int) -> OptimizeReport:
    return optimize(
        writer.spark, table, meta=_entry(writer, batch_id, "optimize"), clones=writer.clones
    )


def _compacted(report: OptimizeReport) -> str:
    return f"{report.files_before} files before, {report.files_after} after"


def _attempt(
    table: str, batch_id: int, operation: Operation, run: Callable[[int], str]
) -> MaintenanceRun:
    try:
        return MaintenanceRun(table, batch_id, operation, run(batch_id))
    except Exception as exc:
        return MaintenanceRun(table, batch_id, operation, _failed(exc), failed=True)


def _vacuum(writer: TableWriter, table: str, batch_id: int) -> str:
    removed = vacuum(
        writer.spark,
        table,
        retain_hours=None,
        replay_window=writer.spec.replay_window,
        meta=_entry(writer, batch_id, "vacuum"),
        clones=writer.clones,
    )
    return (
        f"removed {len(removed.files)} path(s), {removed.size_bytes} bytes "
        f"(retention {removed.retain_hours:g} h)"
    )


def _expire(writer: TableWriter, batch_id: int) -> str:
    return expire_tombstones(writer, batch_id, datetime.now(UTC)).describe()


def _failed(exc: BaseException) -> str:
    return f"failed, tried again at its next turn: {error_summary(exc)}"


def _entry(writer: TableWriter, batch_id: int, operation: Operation) -> CommitMetadata:
    """The ledger entry of an upkeep commit: the app, the batch it followed, the operation."""
    return admin_metadata(
        writer.app_id, batch_id, "maintenance", {"kind": "maintenance", "operation": operation}
    )
