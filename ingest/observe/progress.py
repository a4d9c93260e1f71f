"""The backlog of an available-now ingest as a rich progress bar on a terminal's stderr.

The bar counts the source's unit (files, or Kafka offsets): the total is what the source held
beyond the app's committed batches when the run started (`Source.backlog`), and each committed
batch advances it by what its ledger record names. When stderr is not a terminal nothing is
drawn (`lakehouse ingest` prints its one line per batch and nothing else).
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ingest.observe.facts import source_units
from ingest.observe.observer import RunObserver
from tables.delta.history import read_ledger
from tables.delta.table import table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

    from ingest.commit.batch_result import BatchResult
    from ingest.config import PipelineSpec
    from ingest.sources.backlog import Backlog


def backlog_of(spark: SparkSession, pipeline: PipelineSpec) -> Backlog | None:
    """The pipeline's backlog against its app's ledger; None if it cannot be told (no bar then).

    One read of the table's history (a Spark job) and, for Kafka, one question to the cluster.
    A progress bar is no reason to fail a run, so any error gives None.
    """
    try:
        recorded = (
            [
                e.meta.source
                for e in read_ledger(spark, pipeline.table, app_id=pipeline.app_id)
                if e.meta.kind == "batch"
            ]
            if table_exists(spark, pipeline.table)
            else []
        )
        return pipeline.source.backlog(spark, recorded)
    except Exception:
        return None


def advance_by(result: BatchResult) -> int:
    """How far a settled batch moves the bar: the files or offsets its ledger record names."""
    if result.status == "skipped":
        return 0
    return source_units(result.source)[1]


class BacklogProgress(RunObserver):
    """A transient progress bar of files or offsets done against the backlog at the start."""

    def __init__(self, console: Console, description: str, backlog: Backlog | None) -> None:
        self.unit = backlog.unit if backlog is not None else "batches"
        self.total = backlog.pending if backlog is not None else None
        self.done = 0
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID = self._progress.add_task(description, total=self.total, unit=self.unit)

    def __enter__(self) -> BacklogProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def settled(self, result: BatchResult) -> None:
        """Advance by a settled batch (the total grows if files landed since the start)."""
        step = 1 if self.unit == "batches" and result.status != "skipped" else advance_by(result)
        self.done += step
        if self.total is not None and self.done > self.total:
            self.total = self.done
        self._progress.update(self._task, completed=self.done, total=self.total)

    def failed(self, batch_id: int, error: BaseException) -> None:
        """Nothing to draw: the run reports the failure itself."""
