"""What the log says each app committed: its SetTransaction marker, read without a Spark job.

The marker (txnAppId -> txnVersion) is the authority on the last batch an app committed. It is
read from the snapshot's version checksum (`<v>.crc`, which lists every app's marker) when it
lists them all, else from Delta's own state. On a classic session through delta-spark's JVM API
(`tables.engine.jvm.delta`); over Spark Connect, through public APIs: DESCRIBE HISTORY and DETAIL,
and Spark's JSON and Parquet readers on the log's files, as Delta's PROTOCOL.md describes them (the
checksum, the commits' and checkpoint's `txn` actions). The state rebuild Delta's own read
costs can also be started early, beside other work (`tables.delta.state_rebuild`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from tables.delta.history import history_rows, looked_up_on_failure, naming_damaged_log
from tables.engine.jvm import delta, is_classic
from tables.engine.jvm.conditions import has_condition
from tables.identifiers import quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CHECKSUM_MARKERS_MAX_CONF = "spark.databricks.delta.setTransactionsInCrc.maxAllowed"
CHECKSUM_MARKERS_MAX_DEFAULT = 100
MARKER_RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"


@dataclass(frozen=True)
class MarkerRead:
    """Every app id's marker in the table's snapshot, its version, and where it was read from."""

    markers: dict[str, int]
    from_checksum: bool
    version: int = -1
    table_id: str | None = None
    """Delta's id of the table read (classic sessions): what `tables.delta.key_range` keys facts
    by."""


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

    def read(snapshot: Any) -> MarkerRead:
        listed = delta.checksum_markers(snapshot)
        retention = delta.has_marker_retention(snapshot, MARKER_RETENTION_PROPERTY)
        version, found_id = int(snapshot.version()), delta.table_id(snapshot)
        if listed is not None and is_checksum_complete(len(listed), max_listed, retention):
            return MarkerRead(listed, from_checksum=True, version=version, table_id=found_id)
        markers = delta.state_markers(snapshot)
        return MarkerRead(markers, from_checksum=False, version=version, table_id=found_id)

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
        if has_condition(exc, "PATH_NOT_FOUND"):
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
        if not has_condition(exc, "PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA"):
            raise
    commits = spark.read.json(f"{log}/*.json")
    if "txn" in commits.columns:
        note(commits.where((version_of > checkpoint) & (version_of <= version)))
    return {app: batch for app, (_, batch) in found.items()}


def committed_batches(spark: SparkSession, table: str) -> dict[str, int]:
    """Every app id's SetTransaction marker in the table's current snapshot."""
    return read_markers(spark, table).markers


def committed_batch(spark: SparkSession, table: str, app_id: str) -> int | None:
    """The last batch id the log holds for `app_id`, or None if it never committed."""
    return read_markers(spark, table).markers.get(app_id)
