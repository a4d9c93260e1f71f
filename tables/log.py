"""Reading what a Delta table's log says was committed: app markers and the per-batch ledger.

Two records live in the log, written atomically with the rows of each batch:
- the SetTransaction marker (txnAppId -> txnVersion), the authority on the last batch an app
  committed; read here from the table snapshot through delta-spark's JVM `DeltaLog` API, which
  reads only the log, never data files;
- the commit's userMetadata, a JSON `CommitMetadata` describing the batch (source, counts,
  content hash); read back through `DeltaTable.history()` as the ledger.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from pyspark.sql import SparkSession

from tables.catalog import require_table
from tables.errors import DamagedLogError, first_line
from tables.session import clone_session, jvm_of

T = TypeVar("T")
LEDGER_FORMAT = 1
_LOG_FILE = re.compile(r"[^\s'\"\[\](),]*_delta_log/[^\s'\"\[\](),]+")
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
CommitKind = Literal["batch", "replay", "replace", "reset", "repair"]


@dataclass(frozen=True)
class CommitMetadata:
    """What a lakehouse commit records about its batch in the commit's userMetadata."""

    app_id: str
    batch_id: int
    source: Mapping[str, Any]
    rows_read: int
    rows_quarantined: int
    content_hash: str
    commit_token: str
    kind: CommitKind = "batch"
    checks: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> str:
        """Serialise to the compact JSON stored in the commit."""
        payload = {"lakehouse": LEDGER_FORMAT, **asdict(self)}
        payload["source"] = dict(self.source)
        payload["checks"] = [dict(c) for c in self.checks]
        return json.dumps(payload, separators=(",", ":"), sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> CommitMetadata | None:
        """Parse userMetadata written by this project; None for anything else."""
        if not text:
            return None
        try:
            payload = json.loads(text)
        except ValueError:
            return None
        if not isinstance(payload, dict) or payload.get("lakehouse") != LEDGER_FORMAT:
            return None
        return CommitMetadata(
            app_id=str(payload["app_id"]),
            batch_id=int(payload["batch_id"]),
            source=dict(payload.get("source") or {}),
            rows_read=int(payload.get("rows_read", 0)),
            rows_quarantined=int(payload.get("rows_quarantined", 0)),
            content_hash=str(payload.get("content_hash", "")),
            commit_token=str(payload.get("commit_token", "")),
            kind=payload.get("kind", "batch"),
            checks=tuple(dict(c) for c in payload.get("checks") or () if isinstance(c, dict)),
        )


@dataclass(frozen=True)
class LedgerEntry:
    """One committed batch as the log shows it: its metadata plus the commit's own metrics."""

    version: int
    committed_at: datetime
    operation: str
    meta: CommitMetadata
    rows_merged: int
    rows_inserted: int
    metrics: Mapping[str, str] = field(default_factory=dict)

    @property
    def rows_already_present(self) -> int:
        """Rows of the batch the MERGE found in the table already (a replay, a retried write)."""
        return self.rows_merged - self.rows_inserted

    @property
    def rows_duplicate_in_batch(self) -> int:
        """Valid rows dropped because another row of the same batch had the same record key."""
        return self.meta.rows_read - self.meta.rows_quarantined - self.rows_merged

    def as_row(self) -> dict[str, Any]:
        """Flatten for display and export."""
        return {
            "app_id": self.meta.app_id,
            "batch_id": self.meta.batch_id,
            "version": self.version,
            "kind": self.meta.kind,
            "rows_read": self.meta.rows_read,
            "rows_inserted": self.rows_inserted,
            "rows_already_present": self.rows_already_present,
            "rows_duplicate_in_batch": self.rows_duplicate_in_batch,
            "rows_quarantined": self.meta.rows_quarantined,
            "source": describe_source(self.meta.source),
            "content_hash": self.meta.content_hash,
            "committed_at": self.committed_at.isoformat(sep=" ", timespec="seconds"),
        }


def admin_metadata(
    app_id: str, batch_id: int, kind: CommitKind, source: Mapping[str, Any]
) -> CommitMetadata:
    """The ledger entry of an operator's commit (reset, repair, replay): no rows read by it."""
    return CommitMetadata(
        app_id=app_id,
        batch_id=batch_id,
        source=source,
        rows_read=0,
        rows_quarantined=0,
        content_hash="",
        commit_token=uuid.uuid4().hex,
        kind=kind,
    )


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


def recorded_offsets(source: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Kafka offset ranges a batch's source record holds, or None for other sources."""
    offsets = source.get("offsets")
    return offsets if source.get("kind") == "kafka" and isinstance(offsets, Mapping) else None


def describe_source(source: Mapping[str, Any]) -> str:
    """A short human description of a batch's source record."""
    offsets = recorded_offsets(source)
    if offsets is not None:
        return "kafka: " + "; ".join(
            f"{topic} p{partition} {bounds[0]}-{bounds[1]}"
            for topic, partitions in sorted(offsets.items())
            for partition, bounds in sorted(partitions.items(), key=lambda kv: int(kv[0]))
        )
    files = source.get("files")
    if isinstance(files, list):
        shown = ", ".join(str(f).rsplit("/", 1)[-1] for f in files[:3])
        more = f" (+{len(files) - 3} more)" if len(files) > 3 else ""
        return f"{source.get('format', 'files')}: {shown}{more}"
    return json.dumps(dict(source), sort_keys=True)


def ledger_entry_from_history(row: Mapping[str, Any]) -> LedgerEntry | None:
    """Build a ledger entry from one `DESCRIBE HISTORY` row, or None if not ours."""
    meta = CommitMetadata.from_json(row.get("userMetadata"))
    if meta is None:
        return None
    metrics: dict[str, str] = dict(row.get("operationMetrics") or {})
    inserted = int(metrics.get("numTargetRowsInserted", metrics.get("numOutputRows", "0")))
    return LedgerEntry(
        version=int(row["version"]),
        committed_at=row["timestamp"],
        operation=str(row["operation"]),
        meta=meta,
        rows_merged=int(metrics.get("numSourceRows", inserted)),
        rows_inserted=inserted,
        metrics=metrics,
    )


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
    """Find the commit of (app id, batch id), searching recent history first."""
    require_table(spark, table)
    for limit in (4, 64, None):
        for entry in _ledger(spark, table, app_id, limit):
            if entry.meta.batch_id == batch_id and entry.meta.kind == "batch":
                return entry
    return None


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
    try:
        return read(delta_log(spark, table).update(False, none, none))
    except Exception as exc:
        damaged = damaged_log_file(str(exc))
        if damaged is None:
            raise
        raise DamagedLogError(
            f"table {table}: its Delta log cannot be read, {damaged} is damaged "
            f"({first_line(exc)[:160]}); restore that file, or if it is a checkpoint remove it "
            "and `_last_checkpoint` so Delta rebuilds the state from the JSON commits"
        ) from exc


def damaged_log_file(message: str) -> str | None:
    """The `_delta_log` file an error message names (the deepest path), if any."""
    found = _LOG_FILE.findall(message)
    return found[-1].rstrip(".:;") if found else None


def committed_batches(spark: SparkSession, table: str) -> dict[str, int]:
    """Every app id's SetTransaction marker in the table's current snapshot."""
    require_table(spark, table)

    def markers(snapshot: Any) -> dict[str, int]:
        found: dict[str, int] = {}
        iterator = snapshot.transactions().iterator()
        while iterator.hasNext():
            pair = iterator.next()
            found[str(pair._1())] = int(pair._2())
        return found

    return _read_state(spark, table, markers)


def committed_batch(spark: SparkSession, table: str, app_id: str) -> int | None:
    """The last batch id the log holds for `app_id`, or None if it never committed."""
    require_table(spark, table)
    option = _read_state(spark, table, lambda snapshot: snapshot.transactions().get(app_id))
    return int(option.get()) if option.isDefined() else None


def table_version(spark: SparkSession, table: str) -> int:
    """The table's current version according to its log."""
    return int(_read_state(spark, table, lambda snapshot: snapshot.version()))
