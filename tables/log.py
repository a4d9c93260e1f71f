"""Reading what a Delta table's log says was committed: app markers and the per-batch ledger.

Two records live in the log, written atomically with the rows of each batch:
- the SetTransaction marker (txnAppId -> txnVersion), the authority on the last batch an app
  committed, read from the snapshot's version checksum (`<v>.crc`, which lists every app's
  marker) when it lists them all, else from Delta's own state;
- the commit's userMetadata, a JSON `CommitMetadata` describing the batch (source, counts,
  content hash, audit), read back as the ledger through `DESCRIBE HISTORY`.

On a classic session the marker and the newest commit are read through delta-spark's JVM API
without a Spark job (`tables.jvm.delta`); over Spark Connect, through public APIs: DESCRIBE
HISTORY and DETAIL, and Spark's JSON and Parquet readers on the log's files, as Delta's
PROTOCOL.md describes them (the checksum, the commits' and checkpoint's `txn` actions).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import functions as F

from tables.catalog import require_table
from tables.errors import DamagedLogError, first_line
from tables.identifiers import quote_identifier
from tables.jvm import is_classic
from tables.ledger import LEDGER_FORMAT as LEDGER_FORMAT
from tables.ledger import CommitKind as CommitKind
from tables.ledger import CommitMetadata as CommitMetadata
from tables.ledger import LedgerEntry as LedgerEntry
from tables.ledger import admin_metadata as admin_metadata
from tables.ledger import describe_source as describe_source
from tables.ledger import ledger_entry_from_history as ledger_entry_from_history
from tables.ledger import recorded_offsets as recorded_offsets
from tables.session import clone_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")
_LOG_FILE = re.compile(r"[^\s'\"\[\](),]*_delta_log/[^\s'\"\[\](),]+")
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
CHECKSUM_MARKERS_MAX_CONF = "spark.databricks.delta.setTransactionsInCrc.maxAllowed"
CHECKSUM_MARKERS_MAX_DEFAULT = 100
MARKER_RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"
_HISTORY_COLUMNS = ("version", "timestamp", "operation", "userMetadata", "operationMetrics")


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


def merge_into(
    spark: SparkSession,
    table: str,
    source: DataFrame,
    on: str,
    clauses: Sequence[str],
    meta: CommitMetadata | None = None,
    confs: Mapping[str, str] | None = None,
) -> dict[str, int] | None:
    """Run `MERGE INTO table t USING source s ON on <clauses>` in a commit session.

    The SQL statement works on a classic session and over Spark Connect alike (delta-spark's
    Python MERGE builder needs Delta Connect's server plugin there). The source goes in as a
    temp view of its own session, which the commit session, a clone of it, carries. Returns the
    MERGE's metrics, or None when Delta skipped it because the txn marker already holds it.
    """
    view = f"lakehouse_merge_source_{uuid.uuid4().hex}"
    owner = source.sparkSession
    source.createOrReplaceTempView(view)
    try:
        clone = commit_session(owner, meta, confs)
        statement = (
            f"MERGE INTO {quote_identifier(table)} AS t USING {quote_identifier(view)} AS s "
            f"ON {on} {' '.join(clauses)}"
        )
        rows = clone.sql(statement).collect()
    finally:
        owner.catalog.dropTempView(view)
    return {k: int(v) for k, v in rows[0].asDict().items()} if rows else None


def commit_markers(
    spark: SparkSession, table: str, markers: Mapping[str, int], meta: CommitMetadata
) -> int:
    """Commit bare SetTransaction actions (txnAppId -> version) with a ledger entry; the version.

    Delta's per-write txn options cannot move a marker back (a version at or below the marker is
    skipped) and no public API commits a marker alone, so this needs a classic session
    (`tables.jvm.delta`); over Spark Connect it is one line naming the operation.
    """
    from tables.jvm import delta

    require_table(spark, table)
    delta.commit_bare_markers(spark, commit_session(spark, meta), table, markers)
    return table_version(spark, table)


def read_ledger(
    spark: SparkSession, table: str, *, app_id: str | None = None, limit: int | None = None
) -> list[LedgerEntry]:
    """The lakehouse commits among the table's last `limit` log entries, newest first."""
    require_table(spark, table)
    return _ledger(spark, table, app_id, limit)


def history_rows(spark: SparkSession, table: str, limit: int | None) -> list[dict[str, Any]]:
    """The table's newest `limit` history rows (all when None), newest first."""
    statement = f"DESCRIBE HISTORY {quote_identifier(table)}"
    if limit:
        statement += f" LIMIT {int(limit)}"
    rows = spark.sql(statement).select(*_HISTORY_COLUMNS).collect()
    return [r.asDict() for r in rows]


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
        from tables.jvm import delta

        with naming_damaged_log(table):
            row = delta.newest_commit(spark, table, fresh=fresh)
        if row is not None:
            return ledger_entry_from_history(row)
    rows = history_rows(spark, table, 1)
    return ledger_entry_from_history(rows[0]) if rows else None


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
    """Every app id's marker: from the snapshot's version checksum, else from the whole log.

    The checksum belongs to the snapshot's own version, so both reads describe the same
    version. Delta's `Snapshot.transactions` rebuilds the table state with a Spark job on every
    new version (delta-io/delta#4708, fixed on Delta's master by #6929, in no release yet); the
    checksum holds the same markers and costs no job.
    """
    max_listed = int(
        spark.conf.get(CHECKSUM_MARKERS_MAX_CONF, str(CHECKSUM_MARKERS_MAX_DEFAULT))
        or CHECKSUM_MARKERS_MAX_DEFAULT
    )

    def read() -> MarkerRead:
        with naming_damaged_log(table):
            if is_classic(spark):
                return _classic_markers(spark, table, max_listed)
            return _logged_markers(spark, table, max_listed)

    return looked_up_on_failure(spark, table, read)


def _classic_markers(spark: SparkSession, table: str, max_listed: int) -> MarkerRead:
    from tables.jvm import delta

    def read(snapshot: Any) -> MarkerRead:
        listed = delta.checksum_markers(snapshot)
        retention = delta.has_marker_retention(snapshot, MARKER_RETENTION_PROPERTY)
        version = int(snapshot.version())
        if listed is not None and is_checksum_complete(len(listed), max_listed, retention):
            return MarkerRead(listed, from_checksum=True, version=version)
        return MarkerRead(delta.state_markers(snapshot), from_checksum=False, version=version)

    return delta.read_snapshot(spark, table, read)


def _logged_markers(spark: SparkSession, table: str, max_listed: int) -> MarkerRead:
    """The markers read with Spark's own readers from the log's files (PROTOCOL.md).

    The version comes from DESCRIBE HISTORY, the location and properties from DESCRIBE DETAIL;
    the checksum `<v>.crc` is a JSON object whose `setTransactions` lists the markers. When it
    cannot stand for them, every `txn` action of the newest checkpoint and of the commits after
    it is read, and the newest version of each app id wins, as Delta's own replay does.
    """
    version = int(history_rows(spark, table, 1)[0]["version"])
    detail = spark.sql(f"DESCRIBE DETAIL {quote_identifier(table)}").collect()[0]
    log = f"{str(detail['location']).rstrip('/')}/_delta_log"
    retention = MARKER_RETENTION_PROPERTY in (detail["properties"] or {})
    listed = _checksum_list(spark, f"{log}/{version:020d}.crc")
    if listed is not None and is_checksum_complete(len(listed), max_listed, retention):
        return MarkerRead(listed, from_checksum=True, version=version)
    return MarkerRead(_replayed_markers(spark, log, version), from_checksum=False, version=version)


def _checksum_list(spark: SparkSession, path: str) -> dict[str, int] | None:
    try:
        checksum = spark.read.json(path)
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc):
            return None
        raise
    if "setTransactions" not in checksum.columns:
        return None
    row = checksum.select("setTransactions").collect()[0]
    if row["setTransactions"] is None:
        return None
    return {str(t["appId"]): int(t["version"]) for t in row["setTransactions"]}


def _replayed_markers(spark: SparkSession, log: str, version: int) -> dict[str, int]:
    version_of = F.regexp_extract(F.col("_metadata.file_path"), r"/(\d{20})\.", 1).cast("long")
    found: dict[str, tuple[int, int]] = {}

    def note(frame: Any) -> None:
        rows = frame.where(F.col("txn").isNotNull()).select(
            version_of.alias("v"), F.col("txn.appId").alias("app"), F.col("txn.version")
        )
        for row in rows.collect():
            v = int(row["v"])
            if v <= version and (row["app"] not in found or v >= found[row["app"]][0]):
                found[str(row["app"])] = (v, int(row["version"]))

    checkpoint = -1
    try:
        parts = spark.read.parquet(f"{log}/*.checkpoint*.parquet")
        checkpoints = parts.select(version_of.alias("v")).where(F.col("v") <= version)
        newest = checkpoints.agg(F.max("v")).collect()[0][0]
        if newest is not None:
            checkpoint = int(newest)
            note(parts.where(version_of == checkpoint))
    except Exception as exc:
        if "PATH_NOT_FOUND" not in str(exc) and "UNABLE_TO_INFER_SCHEMA" not in str(exc):
            raise
    commits = spark.read.json(f"{log}/*.json")
    if "txn" in commits.columns:
        note(commits.where((version_of > checkpoint) & (version_of <= version)))
    return {app: batch for app, (_, batch) in found.items()}


@contextmanager
def state_prefetched(spark: SparkSession, table: str) -> Iterator[None]:
    """Rebuild the state of the table's snapshot last read in the background while the block runs.

    Delta's idempotent write reads its marker through `Snapshot.transactions`, which rebuilds
    the new version's state with a Spark job (delta-io/delta#4708), and any scan of the table
    waits for the same rebuild. Neither needs the batch, so a commit starts it beside its own
    preparation, on the second core, instead of after it. The rebuild is Delta's own (a lazy,
    once-per-snapshot value): the marker stays Delta's to check, and a failure here is left to
    the read that needs the state, which raises it with its context. Classic sessions only; over
    Spark Connect the block runs alone.
    """
    if not is_classic(spark):
        yield
        return
    from pyspark import InheritableThread

    from tables.jvm import delta

    def rebuild() -> None:  # the snapshot the marker was just read from: no new listing
        with contextlib.suppress(Exception):
            delta.read_snapshot(spark, table, delta.state_markers, fresh=False)

    thread = InheritableThread(target=rebuild, name=f"lakehouse-state-{table}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def committed_batches(spark: SparkSession, table: str) -> dict[str, int]:
    """Every app id's SetTransaction marker in the table's current snapshot."""
    return read_markers(spark, table).markers


def committed_batch(spark: SparkSession, table: str, app_id: str) -> int | None:
    """The last batch id the log holds for `app_id`, or None if it never committed."""
    return read_markers(spark, table).markers.get(app_id)


def table_version(spark: SparkSession, table: str) -> int:
    """The table's current version according to its log."""
    if is_classic(spark):
        from tables.jvm import delta

        with naming_damaged_log(table):
            return int(delta.read_snapshot(spark, table, lambda snapshot: snapshot.version()))
    return int(history_rows(spark, table, 1)[0]["version"])
