"""The batch's write (a MERGE, or a blind append where the MERGE can match nothing), its retries,
and the report of what landed, read from the log."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from itertools import count
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from ingest.decisions import (
    SOURCE_ALIAS,
    TARGET_ALIAS,
    backoff_seconds,
    commit_landed,
    is_content_conflict,
    should_retry,
)
from quality.markers import batch_markers
from tables.catalog import table_detail
from tables.errors import (
    BatchContentMismatchError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    LakehouseError,
    TerminalError,
    error_summary,
    first_line,
)
from tables.faults import fault_during_write, fault_point
from tables.log import (
    CommitMetadata,
    commit_session,
    committed_batch,
    damaged_log_error,
    find_ledger_entry,
)
from tables.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

from ingest.commit.result import BatchResult, result_from_entry

TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"

_CONFLICT_EXCEPTIONS = frozenset(
    {
        "DeltaConcurrentModificationException",
        "ConcurrentAppendException",
        "ConcurrentDeleteReadException",
        "ConcurrentDeleteDeleteException",
        "ConcurrentTransactionException",
        "ConcurrentWriteException",
        "MetadataChangedException",
        "ProtocolChangedException",
    }
)


def error_kind_of(exc: BaseException) -> LakehouseError:
    """Map an exception from the commit call into the project's error tree."""
    if isinstance(exc, LakehouseError):
        return exc
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _CONFLICT_EXCEPTIONS:
        return CommitConflictError(f"concurrent commit won: {first_line(exc)}")
    if "Py4JNetworkError" in names or isinstance(exc, ConnectionError):
        return CommitOutcomeUnknownError(f"commit call failed: {first_line(exc)}")
    return TerminalError(f"commit failed: {error_summary(exc)}")


def write_with_retries(
    spark: SparkSession,
    spec: TableSpec,
    meta: CommitMetadata,
    source: DataFrame,
    condition: str,
    max_attempts: int,
    *,
    append: bool = False,
) -> BatchResult:
    """Write the batch with its marker and ledger entry, retrying transient failures.

    With `append`, the rows go in as Delta's idempotent append (`txnAppId`/`txnVersion` and the
    ledger entry as per-write options), which is the MERGE's result when the MERGE can match no
    row (`ingest.decisions.should_append`) and costs no scan of the target.
    """
    for attempt in count(1):
        try:
            fault_point("before_write", meta.batch_id)
            with fault_during_write(
                "before_commit", meta.batch_id, lambda: table_detail(spark, spec.name).location
            ):
                if append:
                    _append(spec.name, source, meta)
                    executed = True
                else:
                    executed = _merge(spark, spec.name, source, condition, meta)
            fault_point("after_commit", meta.batch_id)
        except Exception as exc:
            error = error_kind_of(exc)
            if isinstance(error, TerminalError):  # a damaged checkpoint: named, with its remedy
                error = damaged_log_error(spec.name, exc) or error
            committed = committed_batch(spark, spec.name, meta.app_id)
            if commit_landed(committed, meta.batch_id):
                return _landed(spark, spec, meta, attempt, note="outcome confirmed from the log")
            if not should_retry(error.kind, attempt, max_attempts):
                raise error from exc
            time.sleep(backoff_seconds(attempt, jitter=random.uniform(0.5, 1.0)))
            continue
        if not executed:
            return _landed(spark, spec, meta, attempt, note="committed by a concurrent writer")
        return _landed(spark, spec, meta, attempt)
    raise AssertionError("unreachable")


def _append(table: str, source: DataFrame, meta: CommitMetadata) -> None:
    """Append the batch with its marker and ledger entry as per-write options (one commit).

    Delta skips the append when the marker already holds the batch; the report read from the log
    afterwards tells which writer's commit it is.
    """
    marker = batch_markers(table, meta.app_id)[0]
    (
        source.write.format("delta")
        .mode("append")
        .option("txnAppId", marker.txn_app_id)
        .option("txnVersion", meta.batch_id)
        .option("userMetadata", meta.to_json())
        .saveAsTable(table)
    )


def _merge(
    spark: SparkSession, table: str, source: DataFrame, condition: str, meta: CommitMetadata
) -> bool:
    """Run the batch's insert-only MERGE with its txn markers; False if Delta skipped it."""
    marker = batch_markers(table, meta.app_id)[0]
    confs = {TXN_APP_ID_CONF: marker.txn_app_id, TXN_VERSION_CONF: str(meta.batch_id)}
    return run_merge(spark, table, source, condition, meta, confs) is not None


def run_merge(
    spark: SparkSession,
    table: str,
    source: DataFrame,
    condition: str,
    meta: CommitMetadata,
    confs: Mapping[str, str] | None = None,
    *,
    replace_scope: str | None = None,
) -> dict[str, int] | None:
    """MERGE `source` into `table` with `meta`'s ledger entry and `confs`; None if Delta skipped.

    A session per commit (`commit_session`) keeps two commits running at once from one session
    from reading each other's txn markers and userMetadata.
    Without `replace_scope` the MERGE only inserts rows not matched; with it, matched rows within
    the scope are updated and rows within the scope that the source lacks are deleted, in the
    same commit.
    """
    from delta.tables import DeltaTable

    clone = commit_session(spark, meta, confs)
    builder = (
        DeltaTable.forName(clone, table)
        .alias(TARGET_ALIAS)
        .merge(source.alias(SOURCE_ALIAS), condition)
    )
    if replace_scope is not None:
        builder = builder.whenMatchedUpdateAll(replace_scope).whenNotMatchedBySourceDelete(
            replace_scope
        )
    rows = builder.whenNotMatchedInsertAll().execute().collect()
    return {k: int(v) for k, v in rows[0].asDict().items()} if rows else None


def _landed(
    spark: SparkSession, spec: TableSpec, meta: CommitMetadata, attempts: int, *, note: str = ""
) -> BatchResult:
    entry = find_ledger_entry(spark, spec.name, meta.app_id, meta.batch_id)
    if entry is None:
        raise CommitOutcomeUnknownError(
            f"batch {meta.batch_id} of {meta.app_id!r} is marked committed in {spec.name} but "
            "its ledger entry is missing from the table history"
        )
    ours = entry.meta.commit_token == meta.commit_token
    if not ours and not note:
        note = "committed by a concurrent writer"
    if not ours and is_content_conflict(meta.content_hash, entry.meta.content_hash):
        raise BatchContentMismatchError(
            f"batch {meta.batch_id} of app id {meta.app_id!r} was committed to {spec.name} by "
            f"another writer (version {entry.version}) with different content"
        )
    return result_from_entry(
        entry, spec.name, status="committed" if ours else "skipped", attempts=attempts, note=note
    )
