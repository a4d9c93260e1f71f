"""Reading what a Delta table's log says was committed: app markers and the per-batch ledger.

Two records live in the log, written atomically with the rows of each batch:
- the SetTransaction marker (txnAppId -> txnVersion), the authority on the last batch an app
  committed; read here from the table snapshot through delta-spark's JVM `DeltaLog` API, which
  reads only the log, never data files: from the snapshot's version checksum (`<v>.crc`) when it
  lists every marker, else from Delta's own state rebuild (a Spark job per new version,
  delta-io/delta#4708);
- the commit's userMetadata, a JSON `CommitMetadata` describing the batch (source, counts,
  content hash); read back from the newest commit file, or through `DeltaTable.history()`, as
  the ledger.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pyspark.sql import SparkSession

from tables.catalog import require_table
from tables.errors import DamagedLogError, first_line
from tables.ledger import LEDGER_FORMAT as LEDGER_FORMAT
from tables.ledger import CommitKind as CommitKind
from tables.ledger import CommitMetadata as CommitMetadata
from tables.ledger import LedgerEntry as LedgerEntry
from tables.ledger import admin_metadata as admin_metadata
from tables.ledger import describe_source as describe_source
from tables.ledger import ledger_entry_from_history as ledger_entry_from_history
from tables.ledger import recorded_offsets as recorded_offsets
from tables.session import clone_session, jvm_of

T = TypeVar("T")
_LOG_FILE = re.compile(r"[^\s'\"\[\](),]*_delta_log/[^\s'\"\[\](),]+")
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
CHECKSUM_MARKERS_MAX_CONF = "spark.databricks.delta.setTransactionsInCrc.maxAllowed"
CHECKSUM_MARKERS_MAX_DEFAULT = 100
MARKER_RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"


def commit_session(
    spark: SparkSession,
    meta: CommitMetadata | None = None,
    confs: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session clone carrying one commit's userMetadata and per-commit confs, and nothing else.

    Delta reads userMetadata, txn markers and the vacuum retention check from session confs
    (delta-io/delta#3934): set on a clone, they stay with the one commit. Every commit of this
    project that records a ledger entry or sets such a conf runs in a session from here.
    """
    clone = clone_session(spark)
    if meta is not None:
        clone.conf.set(USER_METADATA_CONF, meta.to_json())
    for key, value in (confs or {}).items():
        clone.conf.set(key, value)
    return clone


def commit_markers(
    spark: SparkSession, table: str, markers: Mapping[str, int], meta: CommitMetadata
) -> int:
    """Commit bare SetTransaction actions (txnAppId -> version) with a ledger entry; the version.

    Delta's per-write txn options cannot move a marker back (a version at or below the marker is
    skipped), so an explicit move is a commit of the actions themselves through delta-spark's JVM
    transaction API. The transaction reads userMetadata from the thread's active session, so the
    commit session is made active for the call.
    """
    require_table(spark, table)
    jvm = jvm_of(spark)
    now = jvm.scala.Some(int(time.time() * 1000))
    actions = jvm.java.util.ArrayList()
    for app_id, version in markers.items():
        actions.add(jvm.org.apache.spark.sql.delta.actions.SetTransaction(app_id, version, now))
    operation = getattr(
        getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$ManualUpdate$"), "MODULE$"
    )
    clone = commit_session(spark, meta)
    sessions = jvm.org.apache.spark.sql.SparkSession
    sessions.setActiveSession(clone._jsparkSession)
    try:
        delta_log(spark, table).startTransaction().commit(
            jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toSeq(), operation
        )
    finally:
        sessions.setActiveSession(spark._jsparkSession)
    return table_version(spark, table)


def read_ledger(
    spark: SparkSession, table: str, *, app_id: str | None = None, limit: int | None = None
) -> list[LedgerEntry]:
    """The lakehouse commits among the table's last `limit` log entries, newest first."""
    require_table(spark, table)
    return _ledger(spark, table, app_id, limit)


def _ledger(
    spark: SparkSession, table: str, app_id: str | None, limit: int | None
) -> list[LedgerEntry]:
    from delta.tables import DeltaTable

    history = (
        DeltaTable.forName(spark, table).history(limit)
        if limit
        else (DeltaTable.forName(spark, table).history())
    )
    rows = history.select(
        "version", "timestamp", "operation", "userMetadata", "operationMetrics"
    ).collect()
    entries = [ledger_entry_from_history(r.asDict()) for r in rows]
    return [e for e in entries if e is not None and (app_id is None or e.meta.app_id == app_id)]


def find_ledger_entry(
    spark: SparkSession, table: str, app_id: str, batch_id: int
) -> LedgerEntry | None:
    """Find the commit of (app id, batch id): the newest commit first, then recent history.

    The newest commit is read from its one log file, without a Spark job: right after a commit,
    or on a retried batch, it is almost always the one asked for.
    """
    require_table(spark, table)
    latest = latest_ledger_entry(spark, table)
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


def latest_ledger_entry(spark: SparkSession, table: str) -> LedgerEntry | None:
    """The ledger entry of the newest commit, read from that commit's file; None if not ours.

    Delta's `getCommitInfoOpt` reads the one `<version>.json` through the table's log store, so
    no Spark job runs and the store may be any Delta supports.
    """
    jvm = jvm_of(spark)

    def read(snapshot: Any) -> LedgerEntry | None:
        log = snapshot.deltaLog()
        version = int(snapshot.version())
        path = jvm.org.apache.spark.sql.delta.util.FileNames.unsafeDeltaFile(log.logPath(), version)
        try:
            found = jvm.org.apache.spark.sql.delta.DeltaHistoryManager.getCommitInfoOpt(
                log.store(), path, log.newDeltaHadoopConf()
            )
        except Exception:  # not a plain `<v>.json` (a staged commit): history finds it
            return None
        if not found.isDefined():
            return None
        info = found.get()
        metrics = info.operationMetrics()
        return ledger_entry_from_history(
            {
                "version": version,
                "timestamp": datetime.fromtimestamp(info.timestamp().getTime() / 1000),
                "operation": info.operation(),
                "userMetadata": info.userMetadata().get()
                if info.userMetadata().isDefined()
                else None,
                "operationMetrics": _java_map(jvm, metrics.get()) if metrics.isDefined() else {},
            }
        )

    return _read_state(spark, table, read)


def _java_map(jvm: Any, scala_map: Any) -> dict[str, str]:
    converted = jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_map)
    return {str(k): str(v) for k, v in dict(converted).items()}


def delta_log(spark: SparkSession, table: str) -> Any:
    """delta-spark's JVM `DeltaLog` of a catalog table (for markers and raw transactions)."""
    jspark = spark._jsparkSession
    identifier = jspark.sessionState().sqlParser().parseTableIdentifier(table)
    return jvm_of(spark).org.apache.spark.sql.delta.DeltaLog.forTable(jspark, identifier)


def _read_state(spark: SparkSession, table: str, read: Callable[[Any], T]) -> T:
    """Apply `read` to the table's current snapshot; a damaged log file becomes one clear error.

    The snapshot is built lazily: reading its state (markers, version) is what reads the newest
    checkpoint and the JSON commits after it, so `read` runs inside the same guard.
    """
    none = jvm_of(spark).scala.Option.empty()
    with naming_damaged_log(table):
        return read(delta_log(spark, table).update(False, none, none))


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
    found = _LOG_FILE.findall(message)
    return found[-1].rstrip(".:;") if found else None


@dataclass(frozen=True)
class MarkerRead:
    """Every app id's marker in the table's snapshot, its version, and where it was read from."""

    markers: dict[str, int]
    from_checksum: bool
    version: int = -1


def is_checksum_complete(listed: int | None, max_listed: int, retention_set: bool) -> bool:
    """True if a version checksum's SetTransaction list can stand for the snapshot's markers.

    Delta writes the list into `<v>.crc` only up to `setTransactionsInCrc.maxAllowed` app ids
    (None: not written, or no checksum); a list at that size may have been cut, so it is not
    trusted. With a marker retention set, Delta drops expired markers from its state but the
    checksum may still list them, so Delta's own read decides.
    """
    return listed is not None and listed < max_listed and not retention_set


def read_markers(spark: SparkSession, table: str) -> MarkerRead:
    """Every app id's marker: from the snapshot's version checksum, else Delta's state rebuild.

    The checksum belongs to the snapshot's own version (Delta loads `<v>.crc` for the version it
    listed, or computes it incrementally after its own commit), so both reads describe the same
    version. `Snapshot.transactions` rebuilds the whole table state with a Spark job on every new
    version (delta-io/delta#4708, fixed on Delta's master by #6929, in no release yet); the
    checksum holds the same markers and costs no job.
    """
    require_table(spark, table)
    max_listed = int(
        spark.conf.get(CHECKSUM_MARKERS_MAX_CONF, str(CHECKSUM_MARKERS_MAX_DEFAULT))
        or CHECKSUM_MARKERS_MAX_DEFAULT
    )

    def markers(snapshot: Any) -> MarkerRead:
        listed = _checksum_markers(snapshot)
        retention = bool(snapshot.metadata().configuration().contains(MARKER_RETENTION_PROPERTY))
        version = int(snapshot.version())
        if listed is not None and is_checksum_complete(len(listed), max_listed, retention):
            return MarkerRead(listed, from_checksum=True, version=version)
        return MarkerRead(_state_markers(snapshot), from_checksum=False, version=version)

    return _read_state(spark, table, markers)


def _checksum_markers(snapshot: Any) -> dict[str, int] | None:
    checksum = snapshot.checksumOpt()
    if not checksum.isDefined():
        return None
    listed = checksum.get().setTransactions()
    if not listed.isDefined():
        return None
    found: dict[str, int] = {}
    iterator = listed.get().iterator()
    while iterator.hasNext():
        txn = iterator.next()
        found[str(txn.appId())] = int(txn.version())
    return found


def _state_markers(snapshot: Any) -> dict[str, int]:
    found: dict[str, int] = {}
    iterator = snapshot.transactions().iterator()
    while iterator.hasNext():
        pair = iterator.next()
        found[str(pair._1())] = int(pair._2())
    return found


def committed_batches(spark: SparkSession, table: str) -> dict[str, int]:
    """Every app id's SetTransaction marker in the table's current snapshot."""
    return read_markers(spark, table).markers


def committed_batch(spark: SparkSession, table: str, app_id: str) -> int | None:
    """The last batch id the log holds for `app_id`, or None if it never committed."""
    return read_markers(spark, table).markers.get(app_id)


def table_version(spark: SparkSession, table: str) -> int:
    """The table's current version according to its log."""
    return int(_read_state(spark, table, lambda snapshot: snapshot.version()))
