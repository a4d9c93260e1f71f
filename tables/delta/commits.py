"""Commits that carry a ledger entry: a MERGE, or bare markers, in a session that carries it.

Two records live in the log, written atomically with the rows of each batch: the
SetTransaction marker (txnAppId -> txnVersion), the authority on the last batch an app committed
(`tables.delta.markers` reads it), and the commit's userMetadata, a JSON `CommitMetadata`
describing the batch (source, counts, content hash, audit), read back as the ledger by
`tables.delta.history`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame

from tables.delta.history import table_version
from tables.delta.ledger import CommitMetadata
from tables.delta.table import require_table
from tables.engine.clones import SessionClones
from tables.engine.jvm import delta
from tables.identifiers import quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


@dataclass(frozen=True)
class MergeStatement:
    """`MERGE INTO table t USING source s ON on <clauses>`, with the commit's entry and confs."""

    table: str
    source: DataFrame
    on: str
    clauses: Sequence[str]
    meta: CommitMetadata | None = None
    confs: Mapping[str, str] | None = None


@contextmanager
def commit_session(
    spark: SparkSession,
    clones: SessionClones,
    meta: CommitMetadata | None = None,
    confs: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """A session carrying one commit's userMetadata and per-commit confs, and nothing else.

    Delta reads userMetadata, txn markers and the vacuum retention check from session confs
    (delta-io/delta#3934): set on this thread's clone of `spark` (kept by `clones`, the
    committer's) and unset when the commit is done, they stay with the one commit. Every commit
    of this project that records a ledger entry or sets such a conf runs in a session from here.
    The clone was made before the commit's temp views: a statement names its source as a global
    temporary view (`global_view`).
    """
    clone = clones.for_thread(spark)
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
            clones.forget(spark)


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


def merge_into(merge: MergeStatement, clones: SessionClones) -> dict[str, int] | None:
    """Run the MERGE in a commit session (a clone kept by `clones`).

    The SQL statement works on a classic session and over Spark Connect alike (delta-spark's
    Python MERGE builder needs Delta Connect's server plugin there). Returns the MERGE's
    metrics, or None when Delta skipped it because the txn marker already holds it.
    """
    spark = merge.source.sparkSession
    with (
        global_view(merge.source) as view,
        commit_session(spark, clones, merge.meta, merge.confs) as session,
    ):
        statement = (
            f"MERGE INTO {quote_identifier(merge.table)} AS t USING {view} AS s "
            f"ON {merge.on} {' '.join(merge.clauses)}"
        )
        rows = session.sql(statement).collect()
    return {k: int(v) for k, v in rows[0].asDict().items()} if rows else None


def commit_markers(
    spark: SparkSession, table: str, markers: Mapping[str, int], meta: CommitMetadata
) -> int:
    """Commit bare SetTransaction actions (txnAppId -> version) with a ledger entry; the version.

    Delta's per-write txn options cannot move a marker back (a version at or below the marker is
    skipped) and no public API commits a marker alone, so this needs a classic session
    (`tables.engine.jvm.delta`); over Spark Connect it is one line naming the operation. An
    operator's commit: its clone is its own.
    """
    require_table(spark, table)
    with commit_session(spark, SessionClones(), meta) as session:
        delta.commit_bare_markers(spark, session, table, markers)
    return table_version(spark, table)
