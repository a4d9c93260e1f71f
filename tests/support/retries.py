"""A batch committed as a restarted stream commits it: again after each injected fault."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from tables.errors import InjectedFaultError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tables.delta.writer import TableWriter


def commit_through_faults(writer: TableWriter, batch_id: int, batch: DataFrame) -> int:
    """Commit `batch` with one attempt per call until it lands; the injected faults it met
    (a fault before the commit leaves it to the next call, one after it to the log)."""
    failures = 0
    while True:
        try:
            commit_batch(writer, batch_id, batch, CommitOptions(max_attempts=1))
            return failures
        except InjectedFaultError:
            failures += 1
