"""Delta's log through delta-spark's JVM API: what its public APIs do not offer.

- Markers without a Spark job: no public API reads an app's SetTransaction version. The
  snapshot's version checksum (`<v>.crc`) lists them; `Snapshot.transactions` rebuilds the table
  state with a Spark job on every new version (delta-io/delta#4708).
- The newest commit's `commitInfo` from its one `<v>.json`, with no Spark job (DESCRIBE HISTORY
  runs one).
- Bare SetTransaction commits: Delta's per-write txn options cannot move a marker back.
- A table's rows at the version this process's snapshot holds, without resolving the version
  again: a `versionAsOf` read lists `_delta_log` twice (once from version 0, to check the
  version can still be rebuilt), which on a local disk or HDFS grows with the log.
- A table's key range from its files' statistics (`tables.delta.key_range`): no public API exposes
  them; Delta's data skipping reads the same parsed, cached statistics.

`tables.delta.commits` decides when these are used and reads the same things through public APIs
over Spark Connect.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import DataFrame

from tables.engine.jvm import gateway, java_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


def _delta_log(spark: SparkSession, table: str, operation: str) -> Any:
    """delta-spark's JVM `DeltaLog` of a catalog table."""
    jspark = java_session(spark, operation)
    identifier = jspark.sessionState().sqlParser().parseTableIdentifier(table)
    delta_log = gateway(spark, operation).org.apache.spark.sql.delta.DeltaLog
    return delta_log.forTable(jspark, identifier)


def read_snapshot(
    spark: SparkSession, table: str, read: Callable[[Any], T], *, fresh: bool = True
) -> T:
    """Apply `read` to the table's current snapshot (reading the newest checkpoint and commits).

    With `fresh=False`, to the snapshot this process read last (its last marker read or its own
    commit) instead: no listing of the log, which on a file system without ordered listing
    (local disks, HDFS) reads every file name of `_delta_log` and grows with the log.
    """
    operation = f"reading the Delta log of {table}"
    log = _delta_log(spark, table, operation)
    if not fresh:
        return read(log.unsafeVolatileSnapshot())
    none = gateway(spark, operation).scala.Option.empty()
    return read(log.update(False, none, none))


def checksum_markers(snapshot: Any) -> dict[str, int] | None:
    """The markers the snapshot's version checksum lists; None without a checksum or list."""
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


def state_markers(snapshot: Any) -> dict[str, int]:
    """The markers of Delta's own state rebuild of the snapshot (a Spark job per new version)."""
    found: dict[str, int] = {}
    iterator = snapshot.transactions().iterator()
    while iterator.hasNext():
        pair = iterator.next()
        found[str(pair._1())] = int(pair._2())
    return found


def has_marker_retention(snapshot: Any, retention_property: str) -> bool:
    """True if the table sets a marker retention (Delta drops expired markers from its state)."""
    return bool(snapshot.metadata().configuration().contains(retention_property))


def newest_commit(spark: SparkSession, table: str, *, fresh: bool = True) -> dict[str, Any] | None:
    """The newest commit's history row (version, timestamp, operation, userMetadata, metrics).

    `fresh=False`: of the snapshot this process read last (`read_snapshot`).

    Read from the one `<version>.json` through Delta's `getCommitInfoOpt` and the table's log
    store, so any store Delta supports works; None when the commit is not a plain `<v>.json`
    (a staged commit: history finds it).
    """
    jvm = gateway(spark, f"reading the newest commit of {table}")

    def read(snapshot: Any) -> dict[str, Any] | None:
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
        # The action's own JSON in one call: walking its Scala map over py4j costs a round trip
        # per entry and a converted exception at the end (about 15 ms a commit).
        info = json.loads(found.get().json())["commitInfo"]
        metrics = info.get("operationMetrics") or {}
        return {
            "version": version,
            "timestamp": datetime.fromtimestamp(int(info["timestamp"]) / 1000),
            "operation": info.get("operation"),
            "userMetadata": info.get("userMetadata"),
            "operationMetrics": {str(k): str(v) for k, v in metrics.items()},
        }

    return read_snapshot(spark, table, read, fresh=fresh)


def table_id(snapshot: Any) -> str:
    """The Delta table id of a snapshot's metadata (a dropped and re-created table gets another)."""
    return str(snapshot.metadata().id())


@dataclass(frozen=True)
class SnapshotFiles:
    """A snapshot's table id, version, file count (None: no checksum), whether it maps column
    names, its schema (JSON), and a frame of its files with their parsed statistics."""

    table_id: str
    version: int
    files: int | None
    maps_columns: bool
    schema_json: str
    stats: Callable[[], DataFrame]


def snapshot_files(spark: SparkSession, snapshot: Any) -> SnapshotFiles:
    """What a snapshot says of its data files without a job, and their statistics as a frame.

    The key range of a table (`tables.delta.key_range`) is learned from these: no public API
    exposes a snapshot's parsed file statistics (Delta caches them for its own data skipping),
    its checksum's file count or its column mapping mode.
    """
    checksum = snapshot.checksumOpt()
    return SnapshotFiles(
        table_id=table_id(snapshot),
        version=int(snapshot.version()),
        files=int(checksum.get().numFiles()) if checksum.isDefined() else None,
        maps_columns=str(snapshot.metadata().columnMappingMode().name()) != "none",
        schema_json=str(snapshot.schema().json()),
        stats=lambda: DataFrame(snapshot.withStats(), spark),
    )


def snapshot_frame(spark: SparkSession, table: str, version: int) -> DataFrame | None:
    """The table's rows at `version` from the snapshot this process read last; None if that
    snapshot is at another version.

    The relation is Delta's own (`DeltaLog.createRelation`, what a catalog read of the table
    builds) pinned to the snapshot as a time-travel read, so Delta's file skipping, deletion
    vectors and column mapping apply as they do to `versionAsOf`.
    """
    operation = f"reading {table} at version {version}"
    jvm = gateway(spark, operation)
    log = _delta_log(spark, table, operation)
    snapshot = log.unsafeVolatileSnapshot()
    if int(snapshot.version()) != version:
        return None
    no_filters = jvm.PythonUtils.toSeq(jvm.java.util.ArrayList())
    relation = log.createRelation(
        no_filters, jvm.scala.Some(snapshot), jvm.scala.Option.empty(), True
    )
    return DataFrame(java_session(spark, operation).baseRelationToDataFrame(relation), spark)


def commit_bare_markers(
    spark: SparkSession, commit_session: SparkSession, table: str, markers: Mapping[str, int]
) -> None:
    """Commit SetTransaction actions (txnAppId -> version) alone, in `table`'s log.

    The transaction reads userMetadata from the thread's active session, so `commit_session`
    (which carries the ledger entry) is made the active one for the call.
    """
    operation = "moving a marker (reset-app)"
    jvm = gateway(spark, operation)
    now = jvm.scala.Some(int(time.time() * 1000))
    actions = jvm.java.util.ArrayList()
    for app_id, version in markers.items():
        actions.add(jvm.org.apache.spark.sql.delta.actions.SetTransaction(app_id, version, now))
    manual = getattr(
        getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$ManualUpdate$"), "MODULE$"
    )
    sessions = jvm.org.apache.spark.sql.SparkSession
    sessions.setActiveSession(java_session(commit_session, operation))
    try:
        _delta_log(spark, table, operation).startTransaction().commit(
            jvm.scala.jdk.javaapi.CollectionConverters.asScala(actions).toSeq(), manual
        )
    finally:
        sessions.setActiveSession(java_session(spark, operation))
