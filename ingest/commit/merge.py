"""The batch's write (a MERGE, or a blind append where the MERGE can match nothing), its retries,
and the report of what landed, read from the log."""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from itertools import count

from pyspark.sql import DataFrame, SparkSession

from ingest.commit.batch_result import BatchResult, result_from_entry
from ingest.decisions import (
    backoff_seconds,
    commit_landed,
    is_content_conflict,
    should_retry,
)
from quality.marker_names import batch_markers
from tables.delta.commits import MergeStatement, merge_into
from tables.delta.history import damaged_log_error, find_ledger_entry
from tables.delta.ledger import CommitMetadata
from tables.delta.markers import committed_batch
from tables.delta.table import table_detail
from tables.delta.writer import TableWriter
from tables.engine.jvm.conditions import error_condition, java_class_names
from tables.errors import (
    BatchContentMismatchError,
    CommitConflictError,
    CommitNotWrittenError,
    CommitOutcomeUnknownError,
    LakehouseError,
    TerminalError,
    error_summary,
    first_line,
)
from tables.faults import fault_during_write, fault_point
from tables.spec import TableSpec

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


#: Delta's error conditions for a commit that lost to a concurrent one (DeltaErrors).
_CONFLICT_CONDITIONS = ("DELTA_CONCURRENT_", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED")
#: A Spark Connect error names the server's exception class first: `(io.delta...X) [COND] ...`.
_SERVER_CLASS = re.compile(r"^\(([\w.$]+)\)")
_LOST_CONNECTION = frozenset({"Py4JNetworkError", "RetriesExceeded", "_InactiveRpcError"})
#: The conditional log store's exception for a commit file it knows it did not write.
NOT_WRITTEN_EXCEPTION = "CommitNotWrittenException"


def exception_names(exc: BaseException) -> set[str]:
    """The exception's class names, with the server's class over Spark Connect."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    server_class = _SERVER_CLASS.match(str(exc))
    if server_class:
        names.add(server_class.group(1).rsplit(".", 1)[-1])
    return names


def is_conflict(names: set[str], condition: str | None) -> bool:
    """True if an exception with these class names and error condition is a lost commit race."""
    return bool(names & _CONFLICT_EXCEPTIONS) or (condition or "").startswith(_CONFLICT_CONDITIONS)


def error_kind_of(exc: BaseException) -> LakehouseError:
    """Map an exception from the commit call into the project's error tree.

    Classic sessions raise delta-spark's Python exception classes; over Spark Connect the same
    failure arrives as a Connect exception that carries Delta's error condition and the server's
    class name, so both are consulted.
    """
    if isinstance(exc, LakehouseError):
        return exc
    names = exception_names(exc)
    condition = error_condition(exc)
    if is_conflict(names, condition):
        return CommitConflictError(f"concurrent commit won: {first_line(exc)}")
    if NOT_WRITTEN_EXCEPTION in names | {n.rsplit(".", 1)[-1] for n in java_class_names(exc)}:
        return CommitNotWrittenError(f"commit not written, nothing landed: {first_line(exc)}")
    status = getattr(exc, "getGrpcStatusCode", lambda: None)()
    lost = names & _LOST_CONNECTION or getattr(status, "name", None) == "UNAVAILABLE"
    if lost or isinstance(exc, ConnectionError):
        return CommitOutcomeUnknownError(f"commit call failed: {first_line(exc)}")
    return TerminalError(f"commit failed: {error_summary(exc)}")


@dataclass(frozen=True)
class BatchWrite:
    """A batch's write: its ledger entry, its rows, the MERGE's ON condition, and how it runs.

    With `append`, the rows go in as Delta's idempotent append (`txnAppId`/`txnVersion` and the
    ledger entry as per-write options), which is the MERGE's result when the MERGE can match no
    row (`ingest.decisions.should_append`) and costs no scan of the target. `clauses` replace
    the insert-only MERGE's (an upsert's, `ingest.commit.upsert`). `attempts` bounds the retries.
    """

    meta: CommitMetadata
    source: DataFrame
    condition: str
    append: bool = False
    clauses: list[str] | None = None
    attempts: int = 5


def write_with_retries(writer: TableWriter, write: BatchWrite) -> BatchResult:
    """Write the batch with its marker and ledger entry, retrying transient failures."""
    spark, spec, meta = writer.spark, writer.spec, write.meta
    for attempt in count(1):
        try:
            fault_point("before_write", meta.batch_id)
            with fault_during_write(
                "before_commit", meta.batch_id, lambda: table_detail(spark, spec.name).location
            ):
                if write.append:
                    _append(spec.name, write.source, meta)
                    executed = True
                else:
                    executed = _merge(writer, write)
            fault_point("after_commit", meta.batch_id)
        except Exception as exc:
            error = error_kind_of(exc)
            if isinstance(error, TerminalError):  # a damaged checkpoint: named, with its remedy
                error = damaged_log_error(spec.name, exc) or error
            committed = committed_batch(spark, spec.name, meta.app_id)
            if commit_landed(committed, meta.batch_id):
                return _landed(spark, spec, meta, attempt, note="outcome confirmed from the log")
            if not should_retry(error.kind, attempt, write.attempts):
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


def _merge(writer: TableWriter, write: BatchWrite) -> bool:
    """Run the batch's MERGE (insert-only unless `clauses`) with its txn markers; False if Delta
    skipped it.

    The commit session (`commit_session`, this thread's clone kept by the writer) keeps two
    commits running at once from one session from reading each other's txn markers and
    userMetadata.
    """
    meta = write.meta
    marker = batch_markers(writer.table, meta.app_id)[0]
    confs = {TXN_APP_ID_CONF: marker.txn_app_id, TXN_VERSION_CONF: str(meta.batch_id)}
    clauses = write.clauses if write.clauses is not None else [INSERT_NEW]
    statement = MergeStatement(writer.table, write.source, write.condition, clauses, meta, confs)
    return merge_into(statement, writer.clones) is not None


#: The insert-only MERGE's clause: a row the condition matches is already there.
INSERT_NEW = "WHEN NOT MATCHED THEN INSERT *"


def replace_clauses(scope: str) -> list[str]:
    """The clauses of a MERGE that makes `scope` of the table hold exactly the source's rows:
    matched rows updated, missing ones inserted, rows the source lacks deleted, in one commit."""
    return [
        f"WHEN MATCHED AND ({scope}) THEN UPDATE SET *",
        INSERT_NEW,
        f"WHEN NOT MATCHED BY SOURCE AND ({scope}) THEN DELETE",
    ]


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
