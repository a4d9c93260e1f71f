"""Commits that carry a ledger entry, and reading the ledger back from a Delta table's log.

Two records live in the log, written atomically with the rows of each batch:
- the SetTransaction marker (txnAppId -> txnVersion), the authority on the last batch an app
  committed (`tables.markers` reads it);
- the commit's userMetadata, a JSON `CommitMetadata` describing the batch (source, counts,
  content hash, audit), read back here as the ledger through `DESCRIBE HISTORY`.

On a classic session the newest commit is read through delta-spark's JVM API without a Spark
job (`tables.jvm.delta`); over Spark Connect, through DESCRIBE HISTORY. The reads of both
modules name a damaged log file and a missing table the same way (`naming_damaged_log`,
`looked_up_on_failure`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tables.catalog import require_table
from tables.clones import forget_thread_clone, thread_clone
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
from tables.log_reads import damaged_log_error as damaged_log_error
from tables.log_reads import damaged_log_file as damaged_log_file
from tables.log_reads import history_rows as history_rows
from tables.log_reads import looked_up_on_failure as looked_up_on_failure
from tables.log_reads import naming_damaged_log as naming_damaged_log
from tables.markers import MarkerRead as MarkerRead
from tables.markers import committed_batch as committed_batch
from tables.markers import committed_batches as committed_batches
from tables.markers import read_markers as read_markers
from tables.markers import state_prefetched as state_prefetched

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


@contextmanager
def commit_session(
    spark: SparkSession,
    meta: CommitMetadata | None = None,
    confs: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """A session carrying one commit's userMetadata and per-commit confs, and nothing else.

    Delta reads userMetadata, txn markers and the vacuum retention check from session confs
    (delta-io/delta#3934): set on this thread's clone of `spark` (`tables.clones.thread_clone`)
    and unset when the commit is done, they stay with the one commit. Every commit of this
    project that records a ledger entry or sets such a conf runs in a session from here. The
    clone was made before the commit's temp views: a statement names its source as a global
    temporary view (`global_view`).
    """
    clone = thread_clone(spark)
    settings = {
        **({USER_METADATA_CONF: meta.to_json()} if meta is not None else {}),
        **(confs or {}),
    }
    try:
        for key, value in settings.items():
            clone.conf.set(key, value)
        yield clone
    finally:
        if not _unset_all(clone, settings):
            forget_thread_clone(spark)


def _unset_all(session: SparkSession, keys: Iterable[str]) -> bool:
    """Unset each key, going on past a failure; True if every key was unset.

    A clone left holding a commit's txn marker would make Delta skip a later MERGE through it
    as already applied: one whose confs cannot be cleared is not used again.
    """
    cleared = True
    for key in keys:
        try:
            session.conf.unset(key)
        except Exception:
            cleared = False
    return cleared


@contextmanager
def global_view(source: DataFrame) -> Iterator[str]:
    """`source` as a global temporary view for the commit session; its qualified name, quoted.

    Every session of the application (and of a Connect server) sees a global view, so the
    commit session, a clone made earlier, reads the batch through it; it is dropped after.
    """
    owner = source.sparkSession
    view = f"lakehouse_merge_source_{uuid.uuid4().hex}"
    database = owner.conf.get(_GLOBAL_TEMP_DATABASE_CONF, "global_temp") or "global_temp"
    source.createOrReplaceGlobalTempView(view)
    try:
        yield f"{quote_identifier(database)}.{quote_identifier(view)}"
    finally:
        owner.catalog.dropGlobalTempView(view)


_GLOBAL_TEMP_DATABASE_CONF = "spark.sql.globalTempDatabase"


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
    Python MERGE builder needs Delta Connect's server plugin there). Returns the MERGE's
    metrics, or None when Delta skipped it because the txn marker already holds it.
    """
    with global_view(source) as view, commit_session(source.sparkSession, meta, confs) as session:
        statement = (
            f"MERGE INTO {quote_identifier(table)} AS t USING {view} AS s "
            f"ON {on} {' '.join(clauses)}"
        )
        rows = session.sql(statement).collect()
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
    with commit_session(spark, meta) as session:
        delta.commit_bare_markers(spark, session, table, markers)
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


def table_version(spark: SparkSession, table: str) -> int:
    """The table's current version according to its log."""
    if is_classic(spark):
        from tables.jvm import delta

        with naming_damaged_log(table):
            return int(delta.read_snapshot(spark, table, lambda snapshot: snapshot.version()))
    return int(history_rows(spark, table, 1)[0]["version"])
