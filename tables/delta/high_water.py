"""The highest batch id an app has rows of in a table: when a batch's MERGE can match nothing.

Under `batch` dedup a batch's MERGE matches only rows of its own app id and batch id. A batch id
above every batch id the app has rows of can match nothing, so its commit may be a blind append
carrying the same marker (`ingest.decisions.should_append`). The high-water mark is read from the
table once per writer (the newest `_lh_batch_id` in the app's partition) and raised by every
batch the writer commits. Another process can only lower the marker (a reset), never add rows of
this app above it without moving the marker past them, so a mark read earlier is never too low
for the batches this writer is still to commit.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class HighWater:
    """The high-water marks one writer knows, per table and app id; thread-safe.

    Owned by a `tables.delta.writer.TableWriter`: read once per run, raised by its commits.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], int | None] = {}
        self._lock = threading.Lock()

    def read(self, spark: SparkSession, table: str, app_id: str) -> int | None:
        """The highest batch id `app_id` has rows of in `table` (None: none), read once."""
        key = (table, app_id)
        with self._lock:
            if key in self._known:
                return self._known[key]
        newest = (
            spark.table(table)
            .where(F.col(APP_ID_COLUMN) == app_id)
            .agg(F.max(BATCH_ID_COLUMN).alias("newest"))
            .collect()[0]["newest"]
        )
        found = None if newest is None else int(newest)
        with self._lock:
            self._known[key] = _higher(self._known.get(key, found), found)
            return self._known[key]

    def raise_to(self, table: str, app_id: str, batch_id: int) -> None:
        """Note that `app_id` now has rows of `batch_id` in `table`."""
        with self._lock:
            self._known[(table, app_id)] = _higher(self._known.get((table, app_id)), batch_id)


def _higher(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)
