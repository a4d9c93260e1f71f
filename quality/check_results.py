"""Check outcomes and where they are kept: each batch's ledger entry, and `lakehouse_quality`.

A batch's duplicate audit and expectation outcomes travel in its own commit's ledger entry, so
they land atomically with its rows and cost no commit of their own. `lakehouse_quality` is their
queryable copy: a `ResultLog` buffers the outcomes of a run and appends them in one commit every
`flush_every` batches, every `flush_seconds`, at the end of the run, and at once when an outcome
failed (a `fail` policy must hold the table before the next batch). Each append carries the audit
marker (`audit.<table>.<app id>` -> the newest batch it holds) as Delta's per-write txn options,
so an append repeated after a crash is skipped, and outcomes a crash kept from being appended are
read back from the ledger on the next start (`ingest.runner`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql import functions as F

from tables.delta.table import create_table, table_exists
from tables.spec import parse_struct

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUALITY_TABLE = "lakehouse_quality"
QUALITY_DDL = (
    "table_name STRING NOT NULL, table_version BIGINT, app_id STRING, batch_id BIGINT, "
    "check_name STRING NOT NULL, status STRING NOT NULL, checked_keys BIGINT, "
    "failing_keys BIGINT, sample_keys ARRAY<STRING>, checked_at TIMESTAMP NOT NULL, "
    "action STRING, files_read BIGINT"
)
DUPLICATE_KEYS_CHECK = "duplicate_record_keys"
#: A stream appends its buffered outcomes every this many batches (or `flush_seconds`).
FLUSH_EVERY = 20
CheckStatus = Literal["passed", "failed", "repaired"]


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome for one commit (or for the whole table)."""

    table: str
    check: str
    status: CheckStatus
    checked_keys: int
    failing_keys: int
    sample_keys: tuple[str, ...]
    app_id: str | None = None
    batch_id: int | None = None
    version: int | None = None
    action: str | None = None
    files_read: int | None = None

    def as_row(self) -> dict[str, Any]:
        """The row recorded in the quality table."""
        return {
            "table_name": self.table,
            "table_version": self.version,
            "app_id": self.app_id,
            "batch_id": self.batch_id,
            "check_name": self.check,
            "status": self.status,
            "checked_keys": self.checked_keys,
            "failing_keys": self.failing_keys,
            "sample_keys": list(self.sample_keys),
            "checked_at": datetime.now(UTC),
            "action": self.action,
            "files_read": self.files_read,
        }


def audit_entry(result: CheckResult, as_of: int) -> dict[str, Any]:
    """A duplicate audit as its commit's ledger entry carries it (`as_of`: the version read)."""
    return {
        "status": result.status,
        "checked": result.checked_keys,
        "failing": result.failing_keys,
        "sample": list(result.sample_keys),
        "as_of": as_of,
        "files_read": result.files_read,
    }


def audit_from_entry(
    table: str, app_id: str, batch_id: int, version: int, entry: Mapping[str, Any], action: str
) -> CheckResult:
    """The duplicate audit a ledger entry carries, as a result for the quality table."""
    failing = int(entry.get("failing") or 0)
    return CheckResult(
        table=table,
        check=DUPLICATE_KEYS_CHECK,
        status="failed" if failing else "passed",
        checked_keys=int(entry.get("checked") or 0),
        failing_keys=failing,
        sample_keys=tuple(str(s) for s in entry.get("sample") or ()),
        app_id=app_id,
        batch_id=batch_id,
        version=version,
        action=action,
        files_read=int(entry["files_read"]) if entry.get("files_read") is not None else None,
    )


def checks_from_ledger(
    table: str,
    app_id: str,
    batch_id: int,
    version: int | None,
    checks: tuple[Mapping[str, Any], ...],
) -> list[CheckResult]:
    """The expectation outcomes a commit carried in its ledger entry, as results to record."""
    return [
        CheckResult(
            table=table,
            check=str(c.get("check")),
            status="passed" if c.get("status") == "passed" else "failed",
            checked_keys=int(c.get("checked") or 0),
            failing_keys=int(c.get("failing") or 0),
            sample_keys=tuple(str(s) for s in c.get("sample") or ()),
            app_id=app_id,
            batch_id=batch_id,
            version=version,
            action=str(c.get("action")) if c.get("action") else None,
        )
        for c in checks
    ]


def quality_table_name(table: str) -> str:
    """The quality table in the same database as `table`."""
    database, _, _ = table.rpartition(".")
    return f"{database}.{QUALITY_TABLE}" if database else QUALITY_TABLE


def record(spark: SparkSession, results: list[CheckResult], *, txn: tuple[str, int] | None) -> None:
    """Append results to the quality table; with `txn` (app id, version), at most once."""
    if not results:
        return
    name = quality_table_name(results[0].table)
    schema = parse_struct(QUALITY_DDL)
    create_table(spark, name, schema)
    writer = (
        spark.createDataFrame([r.as_row() for r in results], schema)
        .write.format("delta")
        .option("mergeSchema", "true")
    )
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    writer.mode("append").saveAsTable(name)


def should_flush(
    pending: int, oldest_age: float, *, failed: bool, every: int, seconds: float
) -> bool:
    """True when buffered outcomes are due in the quality table: a failure, a count or an age."""
    return pending > 0 and (failed or pending >= every or oldest_age >= seconds)


@dataclass
class ResultLog:
    """The outcomes of one app's batches into one table, appended to `lakehouse_quality` in bulk.

    `txn_app_id` is the app's audit marker on the quality table; each append carries the newest
    batch id it holds as the marker's version, so a repeated append is skipped by Delta. The
    stream's thread adds and its main thread flushes an idle buffer, so both go through a lock.
    """

    spark: SparkSession
    txn_app_id: str
    flush_every: int = FLUSH_EVERY
    flush_seconds: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _pending: list[tuple[int, list[CheckResult]]] = field(default_factory=list)
    _since: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    append_seconds: float = 0.0
    """Seconds spent appending to `lakehouse_quality` so far (a batch's share is the growth)."""

    def add(self, batch_id: int, results: list[CheckResult]) -> None:
        """Buffer a batch's outcomes; append everything buffered when it is due."""
        if not results:
            return
        with self._lock:
            if self._since is None:
                self._since = self.clock()
            self._pending.append((batch_id, results))
        self._flush(failed=any(r.status != "passed" for r in results))

    def flush_if_due(self) -> None:
        """Append what is buffered if it has waited `flush_seconds` (an idle stream calls this)."""
        self._flush(failed=False)

    def flush(self) -> None:
        """Append every buffered outcome in one commit (nothing to do when nothing is buffered)."""
        with self._lock:
            self._append_pending()

    @property
    def pending(self) -> int:
        """How many batches' outcomes wait for the next append."""
        return len(self._pending)

    def _flush(self, *, failed: bool) -> None:
        with self._lock:
            age = self.clock() - self._since if self._since is not None else 0.0
            every, seconds = self.flush_every, self.flush_seconds
            if should_flush(len(self._pending), age, failed=failed, every=every, seconds=seconds):
                self._append_pending()

    def _append_pending(self) -> None:
        if not self._pending:
            return
        newest = max(batch for batch, _ in self._pending)
        results = [r for _, batch_results in self._pending for r in batch_results]
        started = self.clock()
        record(self.spark, results, txn=(self.txn_app_id, newest))
        self.append_seconds += self.clock() - started
        self._pending.clear()
        self._since = None


def is_recorded(spark: SparkSession, table: str, app_id: str, batch_id: int) -> bool:
    """True if an audit of (app id, batch id) of `table` is in the quality table."""
    name = quality_table_name(table)
    if not table_exists(spark, name):
        return False
    found = spark.table(name).where(
        (F.col("table_name") == table)
        & (F.col("app_id") == app_id)
        & (F.col("batch_id") == batch_id)
    )
    return bool(found.limit(1).count())


def held_by(spark: SparkSession, table: str) -> dict[str, Any] | None:
    """The duplicate finding holding a `fail`-policy table, if its latest audit verdict is one.

    A later passing full check (`lakehouse check TABLE --full`) or a repair releases the table.
    """
    name = quality_table_name(table)
    if not table_exists(spark, name):
        return None
    latest = (
        spark.table(name)
        .where((F.col("table_name") == table) & (F.col("check_name") == DUPLICATE_KEYS_CHECK))
        .orderBy(F.col("checked_at").desc())
        .limit(1)
        .collect()
    )
    if not latest:
        return None
    row = latest[0].asDict()
    return row if row["status"] == "failed" and row.get("action") == "fail" else None


def recent_results(spark: SparkSession, table: str, limit: int) -> list[dict[str, Any]]:
    """The latest recorded outcomes for a table, newest first."""
    name = quality_table_name(table)
    if not table_exists(spark, name):
        return []
    rows = (
        spark.table(name)
        .where(F.col("table_name") == table)
        .orderBy(F.col("checked_at").desc())
        .limit(limit)
        .collect()
    )
    return [r.asDict() for r in rows]
