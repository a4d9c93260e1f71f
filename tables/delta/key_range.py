"""What a writer knows of a table's key range at a version, so an audit can skip its read.

The audit before a commit reads the table within the batch's key bounds; when no file of the
table lies within them (the common case with time-ordered or sequential keys), Delta's file
skipping finds none, but only after a Spark job over the table's file statistics. The same
answer follows, with no job, from the range every key of the table lies in:
1. learned once from Delta's file statistics (beside the state rebuild, off the critical path),
   or known to be empty from the version checksum's file count;
2. carried forward by the writer's own commits: when a commit lands at the version right after
   the one it read, the table there holds the rows it read plus the batch's, all within the
   batch's bounds, so the range widens by them.

A range is a fact about one table (its Delta id) at one version, which never changes; a writer
keeps the ranges it knows (`KeyRanges`), and they end with its run. Anything it cannot vouch for
(another writer's commit in between, a column type whose order Python does not share with Spark,
a file without statistics) leaves the range unknown, and the audit reads as before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType, StructType

from tables.engine.jvm import delta, is_classic
from tables.engine.jvm.delta import SnapshotFiles

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

Bounds = Mapping[str, tuple[Any, Any]]


@dataclass(frozen=True)
class KeyRange:
    """Every non-null value of key columns `keys` of table `table_id` at `version` lies within
    `bounds` (None: the table holds none).

    A key column holding only nulls has (None, None): no row of the table can match a bound on it.
    """

    table_id: str
    version: int
    keys: tuple[str, ...]
    bounds: Bounds | None


def is_orderable(data_type: DataType) -> bool:
    """True if Python orders this type's values as Spark does (so bounds can be compared here).

    Strings under the default (binary) collation order as their code points, which is the
    order of their UTF-8 bytes; integers, decimals and dates order alike. Floating point (NaN,
    -0.0) and timestamps (converted to local wall-clock time, and Delta's statistics keep them
    to the millisecond) are left to Spark.
    """
    if isinstance(data_type, StringType):
        return getattr(data_type, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(data_type, IntegralType | DecimalType | DateType)


def are_keys_orderable(schema: StructType, keys: tuple[str, ...]) -> bool:
    """True if every key column is a top-level column of an orderable type."""
    names = set(schema.fieldNames())
    return all(k in names and is_orderable(schema[k].dataType) for k in keys)


def is_outside(table: KeyRange | None, batch: Bounds) -> bool:
    """True if no row of the table can lie within the batch's bounds on every key column.

    Values that do not compare (a key column whose type changed) answer False: the audit reads.
    """
    if table is None or set(table.keys) != set(batch):
        return False
    if table.bounds is None:
        return True
    try:
        return any(_misses(table.bounds[key], low, high) for key, (low, high) in batch.items())
    except TypeError:
        return False


def _misses(table: tuple[Any, Any], low: Any, high: Any) -> bool:
    """True if a batch's (low, high) on one key column lies outside the table's range on it."""
    if low is None or high is None:
        return False
    table_low, table_high = table
    return table_low is None or bool(high < table_low or low > table_high)


def widened(table: KeyRange, batch: Bounds, version: int) -> KeyRange | None:
    """The range at `version` of a table that held `table`'s rows and gained the batch's.

    None if the batch's key columns are not the range's, or their values do not compare.
    """
    if set(table.keys) != set(batch):
        return None
    if all(low is None for low, _ in batch.values()):
        return KeyRange(table.table_id, version, table.keys, table.bounds)
    if table.bounds is None:
        return KeyRange(table.table_id, version, table.keys, dict(batch))
    merged: dict[str, tuple[Any, Any]] = {}
    try:
        for key, (low, high) in batch.items():
            old_low, old_high = table.bounds[key]
            merged[key] = (
                low if old_low is None else min(old_low, low),
                high if old_high is None else max(old_high, high),
            )
    except TypeError:
        return None
    return KeyRange(table.table_id, version, table.keys, merged)


class KeyRanges:
    """The key ranges one writer knows, one per table (the newest); thread-safe.

    Owned by a `tables.delta.writer.TableWriter`: a run learns and carries its own, and forgets
    them with the run.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled  # off: nothing is known, the audit reads (a bench's A/B)
        self._known: dict[str, KeyRange] = {}
        self._lock = threading.Lock()

    def known(self, table_id: str | None, version: int, keys: tuple[str, ...]) -> KeyRange | None:
        """The range known for key columns `keys` of the table at `version`, if any."""
        if table_id is None or not self.enabled:
            return None
        with self._lock:
            found = self._known.get(table_id)
        if found is None or found.version != version or set(found.keys) != set(keys):
            return None
        return found

    def remember(self, found: KeyRange) -> None:
        """Keep `found` as the table's newest known range (one per table: commits move forward)."""
        with self._lock:
            current = self._known.get(found.table_id)
            if current is None or current.version <= found.version:
                self._known[found.table_id] = found

    def carry(self, table_id: str | None, read: int, landed: int | None, batch: Bounds) -> None:
        """After a commit that read version `read` and landed at `landed`, widen the range.

        Only a commit at the very next version holds nothing but the rows read and the batch's;
        a later version means another commit came between, whose keys this writer does not know.
        """
        if landed is None or landed != read + 1:
            return
        before = self.known(table_id, read, tuple(batch))
        after = widened(before, batch, landed) if before is not None else None
        if after is not None:
            self.remember(after)

    def learn(
        self,
        spark: SparkSession,
        table: str,
        table_id: str | None,
        at: tuple[int, tuple[str, ...]],
    ) -> None:
        """Learn the table's range at version `at[0]` for keys `at[1]` from file statistics.

        Unless already known. Reads the snapshot the session read last (no listing of the log),
        and only if it is that version of that table. Classic sessions only (the statistics are
        reached through Delta's JVM API); a failure leaves the range unknown, and the audit reads
        as it would without it.
        """
        version, keys = at
        if not self.enabled or table_id is None or not is_classic(spark):
            return
        if self.known(table_id, version, keys):
            return

        def read(snapshot: Any) -> KeyRange | None:
            if int(snapshot.version()) != version or delta.table_id(snapshot) != table_id:
                return None
            return stats_range(delta.snapshot_files(spark, snapshot), keys)

        try:
            found = delta.read_snapshot(spark, table, read, fresh=False)
        except Exception:
            return
        if found is not None:
            self.remember(found)


def stats_range(files: SnapshotFiles, keys: tuple[str, ...]) -> KeyRange | None:
    """The range the keys of a snapshot's files lie in, from their statistics.

    None when some file's statistics cannot vouch for a key column (no statistics, or a null
    minimum or maximum beside non-null values), when the table maps column names (its
    statistics use physical names), or when a key column's type in the table is not one Python
    orders as Spark does. One Spark job over Delta's parsed statistics; none when the version
    checksum says there is no file.
    """
    if files.files == 0:
        return KeyRange(files.table_id, files.version, keys, None)
    if files.maps_columns:
        return None
    schema = StructType.fromJson(json.loads(files.schema_json))
    if not are_keys_orderable(schema, keys):  # the table's types, which another writer may change
        return None
    aggregates = []
    for i, key in enumerate(keys):
        low, high = F.col("stats.minValues").getField(key), F.col("stats.maxValues").getField(key)
        nulls, records = F.col("stats.nullCount").getField(key), F.col("stats.numRecords")
        all_null = nulls.isNotNull() & records.isNotNull() & (nulls == records)
        vouched = records.isNotNull() & ((low.isNotNull() & high.isNotNull()) | all_null)
        aggregates += [
            F.min(low).alias(f"low_{i}"),
            F.max(high).alias(f"high_{i}"),
            F.sum(F.when(vouched, 0).otherwise(1)).alias(f"unknown_{i}"),
        ]
    try:
        row = files.stats().agg(*aggregates).collect()[0]
    except Exception:  # a key column without statistics (not among the indexed columns)
        return None
    if any(int(row[f"unknown_{i}"] or 0) for i in range(len(keys))):
        return None
    if all(row[f"low_{i}"] is None for i in range(len(keys))):
        return KeyRange(files.table_id, files.version, keys, None)
    bounds = {key: (row[f"low_{i}"], row[f"high_{i}"]) for i, key in enumerate(keys)}
    return KeyRange(files.table_id, files.version, keys, bounds)
