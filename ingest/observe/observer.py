"""What watches a run: the console, the batch log, the metrics, the progress bar.

The runner tells one `RunObserver` of each batch committed, each audit settled, each batch
settled (with its stage timings), each batch that failed and each upkeep operation. `Observers`
hands each event to several, and one that fails is reported once and never fails a batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.commit.batch_result import BatchResult
    from ingest.maintenance import MaintenanceRun
    from quality.check_results import CheckResult


class RunObserver:
    """Watches a run's batches; each event does nothing here, subclasses take what they need."""

    def committed(self, result: BatchResult) -> None:
        """A batch committed (or skipped), before its audit settled."""

    def audited(self, audit: CheckResult) -> None:
        """An audit or expectation outcome settled (a recovered one too)."""

    def settled(self, result: BatchResult) -> None:
        """A batch whose audit settled, with its stage timings."""

    def failed(self, batch_id: int, error: BaseException) -> None:
        """A batch that failed (not one a stop skipped)."""

    def maintained(self, run: MaintenanceRun) -> None:
        """The run compacted or vacuumed its table after a batch (`ingest.maintenance`)."""


class Observers(RunObserver):
    """Hands each event to every observer; one that fails is reported once and never fails it."""

    def __init__(self, warn: Callable[[str], object]) -> None:
        self.observers: list[RunObserver] = []
        self._warn = warn
        self._broken: set[int] = set()

    def committed(self, result: BatchResult) -> None:
        """Tell every observer of a committed batch."""
        self._each(lambda o: o.committed(result))

    def audited(self, audit: CheckResult) -> None:
        """Tell every observer of a settled outcome."""
        self._each(lambda o: o.audited(audit))

    def settled(self, result: BatchResult) -> None:
        """Tell every observer of a settled batch."""
        self._each(lambda o: o.settled(result))

    def failed(self, batch_id: int, error: BaseException) -> None:
        """Tell every observer of a failed batch."""
        self._each(lambda o: o.failed(batch_id, error))

    def maintained(self, run: MaintenanceRun) -> None:
        """Tell every observer of an upkeep operation."""
        self._each(lambda o: o.maintained(run))

    def _each(self, call: Callable[[RunObserver], None]) -> None:
        for observer in self.observers:
            try:
                call(observer)
            except Exception as exc:
                if id(observer) not in self._broken:
                    self._warn(f"warning: {type(observer).__name__} failed ({exc}); going on")
                self._broken.add(id(observer))
