"""What this process knows of a table's key range at a version, so an audit can skip its read.

The audit before a commit reads the table within the batch's key bounds; when no file of the
table lies within them (the common case with time-ordered or sequential keys), Delta's file
skipping finds none, but only after a Spark job over the table's file statistics. The same
answer follows, with no job, from the range every key of the table lies in:
1. learned once from Delta's file statistics (beside the state rebuild, off the critical path),
   or known to be empty from the version checksum's file count;
2. carried forward by this process's own commits: when a commit lands at the version right after
   the one it read, the table there holds the rows it read plus the batch's, all within the
   batch's bounds, so the range widens by them.

A range is a fact about one table (its Delta id) at one version, which never changes. Anything
this process cannot vouch for (another writer's commit in between, a column type whose order
Python does not share with Spark, a file without statistics) leaves the range unknown, and the
audit reads as before.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

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


_known: dict[str, KeyRange] = {}
_lock = threading.Lock()


def known_range(table_id: str | None, version: int, keys: tuple[str, ...]) -> KeyRange | None:
    """The range this process knows for key columns `keys` of the table at `version`, if any."""
    if table_id is None:
        return None
    with _lock:
        found = _known.get(table_id)
    if found is None or found.version != version or set(found.keys) != set(keys):
        return None
    return found


def remember(found: KeyRange) -> None:
    """Keep `found` as the table's newest known range (one per table: commits move forward)."""
    with _lock:
        current = _known.get(found.table_id)
        if current is None or current.version <= found.version:
            _known[found.table_id] = found


def carry(table_id: str | None, read: int, landed: int | None, batch: Bounds) -> None:
    """After a commit that read version `read` and landed at `landed`, widen the known range.

    Only a commit at the very next version holds nothing but the rows read and the batch's; a
    later version means another commit came between, whose keys this process does not know.
    """
    if landed is None or landed != read + 1:
        return
    before = known_range(table_id, read, tuple(batch))
    after = widened(before, batch, landed) if before is not None else None
    if after is not None:
        remember(after)


def learn(
    spark: SparkSession, table: str, table_id: str | None, version: int, keys: tuple[str, ...]
) -> None:
    """Learn the table's range at `version` from its files' statistics, unless already known.

    Reads the snapshot this process read last (no listing of the log), and only if it is that
    version of that table. Classic sessions only (the statistics are reached through Delta's
    JVM API); a failure leaves the range unknown, and the audit reads as it would without it.
    """
    from tables.jvm import is_classic

    known = known_range(table_id, version, keys)
    if table_id is None or not is_classic(spark) or known is not None:
        return
    from tables.jvm import delta

    def read(snapshot: Any) -> KeyRange | None:
        if int(snapshot.version()) != version or delta.table_id(snapshot) != table_id:
            return None
        return delta.stats_key_range(spark, snapshot, keys)

    try:
        found = delta.read_snapshot(spark, table, read, fresh=False)
    except Exception:
        return
    if found is not None:
        remember(found)


def forget_all() -> None:
    """Drop every known range (tests; a process that wants the audit to read again)."""
    with _lock:
        _known.clear()
