"""Reading a table's log: its history rows, the ledger entries, the version, the table at a
version; a damaged log file and a missing table named.

On a classic session the newest commit is read through delta-spark's JVM API without a Spark
job (`tables.engine.jvm.delta`); over Spark Connect, and for older entries, through DESCRIBE
HISTORY. The markers (`tables.delta.markers`) read the log through these too, so a damaged
`_delta_log` file or a table that is not in the catalog reads as one clear error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from tables.delta.ledger import LedgerEntry, ledger_entry_from_history
from tables.delta.table import require_table
from tables.engine.jvm import delta, is_classic
from tables.errors import DamagedLogError, first_line
from tables.identifiers import quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")
#: A path's characters in an error message; `_delta_log/` is found first and the path grown
#: around it, so a long message costs one pass (a pattern that starts anywhere and backtracks to
#: `_delta_log/` costs the square of a long run without spaces, such as a record's value).
_PATH_CHARS = re.compile(r"[^\s'\"\[\](),]*")
_LOG_DIR = "_delta_log/"
_HISTORY_COLUMNS = ("version", "timestamp", "operation", "userMetadata", "operationMetrics")


def history_rows(spark: SparkSession, table: str, limit: int | None) -> list[dict[str, Any]]:
    """The table's newest `limit` history rows (all when None), newest first."""
    statement = f"DESCRIBE HISTORY {quote_identifier(table)}"
    if limit:
        statement += f" LIMIT {int(limit)}"
    rows = spark.sql(statement).select(*_HISTORY_COLUMNS).collect()
    return [r.asDict() for r in rows]


def table_at(spark: SparkSession, table: str, version: int) -> DataFrame:
    """The table's rows at `version`, as `versionAsOf` reads them.

    Where this process's snapshot of the table is at that version (a commit's marker read just
    listed it), the rows come from that snapshot: a `versionAsOf` read resolves the version
    again by listing `_delta_log` twice, which on a local disk or HDFS costs a scan of every log
    file name (0.13 s at 1,000 commits, measured). Otherwise, and over Spark Connect, Delta
    resolves it.
    """

    pinned = delta.snapshot_frame(spark, table, version) if is_classic(spark) else None
    if pinned is not None:
        return pinned
    return spark.read.option("versionAsOf", version).table(table)


def looked_up_on_failure(spark: SparkSession, table: str, read: Callable[[], T]) -> T:
    """`read()`, looking the table up in the catalog only if it fails, then reading once more.

    A per-batch read costs less than a catalog lookup before it. The lookup raises
    TableNotFoundError for a table that is not there, and registers one that another process
    created in the embedded warehouse since this session started; a second failure is the
    read's own.
    """
    try:
        return read()
    except Exception:
        require_table(spark, table)
    return read()


@contextmanager
def naming_damaged_log(table: str) -> Iterator[None]:
    """Turn a failure that names a damaged `_delta_log` file of `table` into DamagedLogError."""
    try:
        yield
    except Exception as exc:
        damaged = damaged_log_error(table, exc)
        if damaged is None:
            raise
        raise damaged from exc


def damaged_log_error(table: str, exc: BaseException) -> DamagedLogError | None:
    """The one clear error for a failure that names a damaged `_delta_log` file, if it does."""
    damaged = damaged_log_file(str(exc))
    if damaged is None:
        return None
    return DamagedLogError(
        f"table {table}: its Delta log cannot be read, {damaged} is damaged "
        f"({first_line(exc)[:160]}); restore that file, or if it is a checkpoint remove it "
        "and `_last_checkpoint` so Delta rebuilds the state from the JSON commits"
    )


def damaged_log_file(message: str) -> str | None:
    """The `_delta_log` file an error message names (the deepest path), if any."""
    found: str | None = None
    at = 0
    while (hit := message.find(_LOG_DIR, at)) >= 0:
        left = _PATH_CHARS.match(message[at:hit][::-1])
        start = hit - (left.end() if left else 0)
        right = _PATH_CHARS.match(message, hit + len(_LOG_DIR))
        end = right.end() if right else hit + len(_LOG_DIR)
        if end > hit + len(_LOG_DIR):
            found = message[start:end]
        at = end
    return found.rstrip(".:;") if found else None


def read_ledger(
    spark: SparkSession, table: str, *, app_id: str | None = None, limit: int | None = None
) -> list[LedgerEntry]:
    """The lakehouse commits among the table's last `limit` log entries, newest first."""
    require_table(spark, table)
    return _ledger(spark, table, app_id, limit)


def _ledger(
    spark: SparkSession, table: str, app_id: str | None, limit: int | None
) -> list[LedgerEntry]:
    entries = [ledger_entry_from_history(r) for r in history_rows(spark, table, limit)]
    return [e for e in entries if e is not None and (app_id is None or e.meta.app_id == app_id)]


def find_ledger_entry(
    spark: SparkSession, table: str, app_id: str, batch_id: int
) -> LedgerEntry | None:
    """Find the commit of (app id, batch id): the newest commit first, then recent history.

    Right after a commit, or on a retried batch, the newest commit is almost always the one
    asked for. That look goes to the snapshot this process read last (its marker read, which
    decided the batch, or its own commit), not to a new listing of the log: one that is stale
    only sends the search on to history.
    """
    latest = looked_up_on_failure(
        spark, table, lambda: latest_ledger_entry(spark, table, fresh=False)
    )
    if latest is not None and is_batch_entry(latest, app_id, batch_id):
        return latest
    for limit in (4, 64, None):
        for entry in _ledger(spark, table, app_id, limit):
            if is_batch_entry(entry, app_id, batch_id):
                return entry
    return None


def is_batch_entry(entry: LedgerEntry, app_id: str, batch_id: int) -> bool:
    """True if `entry` is the stream commit of (app id, batch id)."""
    return (entry.meta.app_id, entry.meta.batch_id, entry.meta.kind) == (app_id, batch_id, "batch")


def latest_ledger_entry(
    spark: SparkSession, table: str, *, fresh: bool = True
) -> LedgerEntry | None:
    """The ledger entry of the newest commit; None if that commit is not this project's.

    A classic session reads the commit's one file (no Spark job), with `fresh=False` the newest
    commit of the snapshot it read last; otherwise the newest row of DESCRIBE HISTORY.
    """
    if is_classic(spark):
        with naming_damaged_log(table):
            row = delta.newest_commit(spark, table, fresh=fresh)
        if row is not None:
            return ledger_entry_from_history(row)
    rows = history_rows(spark, table, 1)
    return ledger_entry_from_history(rows[0]) if rows else None


def table_version(spark: SparkSession, table: str) -> int:
    """The table's current version according to its log."""
    if is_classic(spark):
        with naming_damaged_log(table):
            return int(delta.read_snapshot(spark, table, lambda snapshot: snapshot.version()))
    return int(history_rows(spark, table, 1)[0]["version"])
