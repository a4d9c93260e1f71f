"""`<home>/logs/batches.jsonl`: one JSON line per stream batch, appended as the batch settles.

Each line says what a batch did (status, version, rows by fate), where its time went (seconds per
stage, `ingest.timings`) and how fresh its data was (bytes and lag, from its files). Several
ingest processes on one home append to the same file: each line is one `write` on a file opened
for appending, which the operating system does not interleave. A line that cannot be written is
reported once on stderr and never fails the batch.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.observe.facts import SourceFacts, lag_seconds, source_facts
from ingest.observe.observer import RunObserver
from tables.errors import error_summary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.commit.batch_result import BatchResult

BATCH_LOG = Path("logs") / "batches.jsonl"


def batch_record(
    table: str,
    app_id: str,
    batch_id: int,
    result: BatchResult | None,
    facts: SourceFacts | None,
    now: float,
    error: BaseException | None = None,
) -> dict[str, Any]:
    """The line of one batch: a settled `result`, or a batch that failed with `error`."""
    record: dict[str, Any] = {
        "at": datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds"),
        "table": table,
        "app_id": app_id,
        "batch_id": batch_id,
        "status": result.status if result is not None and error is None else "failed",
        "version": result.version if result is not None else None,
    }
    if result is not None:
        record["seconds"] = {k: round(v, 3) for k, v in sorted(result.timings.items())}
        record["rows"] = {
            "read": result.rows_read,
            "inserted": result.rows_inserted,
            "already_present": result.rows_already_present,
            "updated": result.rows_updated,
            "deleted": result.rows_deleted,
            "ignored_older": result.rows_ignored_older,
            "after_horizon": result.rows_after_horizon,
            "duplicate_in_batch": result.rows_duplicate_in_batch,
            "quarantined": result.rows_quarantined,
        }
    if facts is not None:
        record["source"] = {"unit": facts.unit, "count": facts.count}
        record["bytes"] = facts.bytes
        record["lag_seconds"] = lag_seconds(now, facts.newest_modified)
    if error is not None:
        record["error"] = f"{type(error).__name__}: {error_summary(error, limit=300)}"
    return record


class BatchLog(RunObserver):
    """Appends each batch's line to one file; the first failed write is reported, none raises."""

    def __init__(
        self,
        path: Path,
        table: str,
        app_id: str,
        *,
        spark: SparkSession | None = None,
        warn: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.table = table
        self.app_id = app_id
        self._spark = spark
        self._warn = warn
        self._clock = clock
        self._warned = False

    def settled(self, result: BatchResult) -> None:
        """Append the line of a batch whose audit settled."""
        facts = source_facts(self._spark, result.source) if result.source else None
        self._append(
            batch_record(result.table, self.app_id, result.batch_id, result, facts, self._clock())
        )

    def failed(self, batch_id: int, error: BaseException) -> None:
        """Append the line of a batch that failed."""
        self._append(
            batch_record(self.table, self.app_id, batch_id, None, None, self._clock(), error)
        )

    def _append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            if self._warn is not None and not self._warned:
                self._warn(f"batch log {self.path}: cannot append ({exc.strerror}); going on")
            self._warned = True
