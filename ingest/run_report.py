"""A run's report: running totals over all its batches, and its newest results in full.

A stream runs for weeks. A report that kept every batch's result, audit and upkeep for the
run's summary held 2.25 KB more a batch (`tracemalloc` in a `lakehouse ingest` process,
2026-12-06; 0.08 with the report bounded): a month at a batch a second is gigabytes. The
summary needs totals only; the newest `KEPT` results, audits and upkeep runs stay in full for
whoever wants the detail (the run's caller, tests), the oldest dropped as new ones come.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ingest.commit.batch_result import BatchResult
    from ingest.maintenance import MaintenanceRun
    from quality.check_results import CheckResult

#: How many of its newest results, audits, failed audits and upkeep runs a report keeps.
KEPT = 1_000
#: The row fates a run's summary totals (`BatchResult.rows_<fate>`).
FATES = ("inserted", "updated", "deleted", "ignored_older", "quarantined")

_Item = TypeVar("_Item")


def kept_newest(items: list[_Item], item: _Item, kept: int = KEPT) -> None:
    """Append `item`, dropping the oldest items beyond `kept`."""
    items.append(item)
    if len(items) > kept:
        del items[: len(items) - kept]


@dataclass
class BatchTotals:
    """Running totals of batch results: batches by status, rows by fate, and whether any of
    them went through the upsert MERGE."""

    statuses: Counter[str] = field(default_factory=Counter)
    rows: Counter[str] = field(default_factory=Counter)
    upsert: bool = False

    def add(self, result: BatchResult) -> None:
        """Count one batch's result in."""
        self.statuses[result.status] += 1
        for fate in FATES:
            self.rows[fate] += getattr(result, f"rows_{fate}")
        self.upsert = self.upsert or result.is_upsert

    @property
    def batches(self) -> int:
        """How many results were counted in."""
        return sum(self.statuses.values())


@dataclass
class RunReport:
    """The outcome of one run of a pipeline: its totals, and its newest results in full.

    A routed pipeline has a result per target per batch: the totals are over all of them, and
    `tables` has each target's own.
    """

    pipeline: str
    app_id: str
    table: str
    results: list[BatchResult] = field(default_factory=list)
    """The newest `KEPT` results, oldest first."""
    audits: list[CheckResult] = field(default_factory=list)
    """The newest `KEPT` settled outcomes, oldest first."""
    docs_url: str | None = None
    quarantine_table: str = ""
    stopped_by: int | None = None
    removed_temp_files: tuple[str, ...] = ()
    finished_reset: str | None = None
    maintenance: list[MaintenanceRun] = field(default_factory=list)
    """The newest `KEPT` upkeep runs."""
    #: A routed pipeline's dead-letter table and the records this run sent there.
    dead_letter_table: str | None = None
    dead_letters: int = 0
    tables: dict[str, BatchTotals] = field(default_factory=dict)
    """Each target table's totals, in the order their first results came."""
    last_batch_id: int | None = None
    """The highest batch id of any result of the run."""
    failed_audits: list[CheckResult] = field(default_factory=list)
    """The newest `KEPT` post-commit checks that found duplicate keys or failing rows."""
    audits_failed: int = 0
    """How many post-commit checks of the run failed."""

    def add_result(self, result: BatchResult) -> None:
        """Count a batch's result (committed, skipped or empty) and keep it among the newest."""
        kept_newest(self.results, result)
        self.tables.setdefault(result.table, BatchTotals()).add(result)
        if self.last_batch_id is None or result.batch_id > self.last_batch_id:
            self.last_batch_id = result.batch_id

    def add_audit(self, audit: CheckResult) -> None:
        """Count a settled outcome and keep it among the newest."""
        kept_newest(self.audits, audit)
        if audit.status == "failed":
            self.audits_failed += 1
            kept_newest(self.failed_audits, audit)

    def add_upkeep(self, run: MaintenanceRun) -> None:
        """Keep an upkeep run among the newest."""
        kept_newest(self.maintenance, run)

    @property
    def totals(self) -> BatchTotals:
        """The totals over every table of the run."""
        every = BatchTotals()
        for table in self.tables.values():
            every.statuses.update(table.statuses)
            every.rows.update(table.rows)
            every.upsert = every.upsert or table.upsert
        return every

    @property
    def batches(self) -> int:
        """How many results the run had (one per batch, or per target of a routed batch)."""
        return self.totals.batches

    def count(self, status: str) -> int:
        """How many batches ended with `status`."""
        return self.totals.statuses[status]

    @property
    def rows_inserted(self) -> int:
        """Rows this run added to its tables."""
        return self.totals.rows["inserted"]

    def total(self, fate: str) -> int:
        """This run's rows of one fate (`updated`, `deleted`, ...) over its batches."""
        if fate not in FATES:
            raise ValueError(f"fate must be one of {', '.join(FATES)}, got {fate!r}")
        return self.totals.rows[fate]

    @property
    def is_upsert(self) -> bool:
        """True if this run's batches went through the upsert MERGE."""
        return self.totals.upsert

    @property
    def rows_quarantined(self) -> int:
        """Rows this run sent to the quarantine tables."""
        return self.totals.rows["quarantined"]
