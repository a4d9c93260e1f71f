"""The exactly-once batch commit: one idempotent MERGE per (table, app id, batch id).

Protocol (docs/DESIGN.md walks through it and its failure modes):
1. Read the app's SetTransaction marker from the log (no data is scanned).
2. Decide (`ingest.decisions.decide_batch`): commit, skip a retry, or stop on a rewound stream.
   A skipped batch is checked against the ledger's content hash; different content is an error.
3. Materialise the batch once (persist) so every later step sees the same rows, even from a
   non-deterministic source; classify rows; count them and hash their content in one job.
4. Write rejected rows to the quarantine table (idempotent per batch through its own marker).
5. MERGE the deduplicated valid rows, WHEN NOT MATCHED INSERT, with the ON clause pinned to
   literal app id and batch id, in a clone of the session that alone carries txnAppId,
   txnVersion and the commit's userMetadata. Rows, marker and ledger entry land in one commit.
6. On any failure, re-read the marker before anything else: if the batch landed, the outcome is
   known and reported; otherwise retry transient errors with backoff.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import count
from typing import TYPE_CHECKING, Any, Literal

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ingest.decisions import (
    SOURCE_ALIAS,
    TARGET_ALIAS,
    TimeWindow,
    backoff_seconds,
    commit_landed,
    decide_batch,
    dedup_condition,
    is_content_conflict,
    should_retry,
)
from quality.audit import CheckResult, checks_from_ledger, record
from quality.expectations import quarantine_reasons, should_stop, stop_message
from quality.fates import assert_nothing_rescued, landed_columns, one_row_per_undecodable_file
from quality.malformed import (
    COPY_COLUMN,
    CORRUPT_COLUMN,
    ROW_HASH_COLUMN,
    SOURCE_FILE_COLUMN,
    classify,
    classify_rows,
    landable_rows,
    with_raw_record,
)
from quality.markers import batch_markers
from quality.quarantine import (
    REASON_COLUMN,
    ensure_quarantine_table,
    write_quarantine,
)
from quality.records import (
    FAULT_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    UNDECODABLE_PREFIX,
    with_rescued,
)
from tables.catalog import require_table, schema_differences, table_detail
from tables.errors import (
    BatchContentMismatchError,
    CheckpointLostError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    ExpectationFailedError,
    LakehouseError,
    SchemaMismatchError,
    TerminalError,
    error_summary,
    first_line,
)
from tables.faults import fault_during_write, fault_point
from tables.identifiers import validate_app_id
from tables.log import (
    CommitMetadata,
    LedgerEntry,
    commit_session,
    committed_batch,
    find_ledger_entry,
)
from tables.spec import (
    APP_ID_COLUMN,
    BATCH_ID_COLUMN,
    INGESTED_AT_COLUMN,
    RESCUED_COLUMN,
    TableSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from quality.expectations import ExpectationGate, GateOutcome

BatchStatus = Literal["committed", "skipped", "empty"]

TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
READER_COLUMNS = (
    CORRUPT_COLUMN,
    SOURCE_FILE_COLUMN,
    RECORD_COLUMN,
    FAULT_COLUMN,
    RESCUED_COLUMN,
    RESCUE_INPUT_COLUMN,
)
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


@dataclass(frozen=True)
class BatchResult:
    """What happened to one batch, as reported to the stream runner and the CLI."""

    table: str
    app_id: str
    batch_id: int
    status: BatchStatus
    rows_read: int = 0
    rows_inserted: int = 0
    rows_already_present: int = 0
    rows_duplicate_in_batch: int = 0
    rows_quarantined: int = 0
    version: int | None = None
    content_hash: str = ""
    attempts: int = 0
    note: str = ""
    checks: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class BatchStats:
    """The figures of one batch gathered in a single aggregation job."""

    rows: int
    rows_rejected: int
    content_hash: str
    files: tuple[str, ...]
    rows_copies: int = 0
    newest_time: str | None = None
    undecodable_files: tuple[str, ...] = ()


def commit_batch(
    spark: SparkSession,
    spec: TableSpec,
    app_id: str,
    batch_id: int,
    batch: DataFrame,
    *,
    source: Mapping[str, Any] | None = None,
    raw_format: str | None = None,
    reader_options: Mapping[str, str] | None = None,
    gate: ExpectationGate | None = None,
    fail_on_rewind: bool = False,
    max_attempts: int = 5,
) -> BatchResult:
    """Commit `batch` into `spec`'s table exactly once for (app id, batch id).

    `batch` has the spec's data columns, optionally with the reader's corrupt-record and
    source-file columns; `raw_format` and `reader_options` say how the corrupt text was read, so
    that its quarantine reason can name the fault. `source` describes where the batch came from
    (merged into the ledger entry). `gate` validates the batch against the table's expectation
    suite. With `fail_on_rewind`, a batch id below the log's marker raises CheckpointLostError
    instead of being skipped: a stream uses this to detect a lost or rewound checkpoint.
    """
    validate_app_id(app_id)
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be a non-negative int, got {batch_id!r}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    require_table(spark, spec.name)
    schema = spec.data_schema(spark)
    assert_batch_schema(batch.schema, schema, spec.name)

    committed = committed_batch(spark, spec.name, app_id)
    action = decide_batch(batch_id, committed, fail_on_rewind=fail_on_rewind)
    if action == "rewound":
        raise CheckpointLostError(rewound_message(spec.name, app_id, batch_id, committed))
    if action == "skip":
        return _skip_committed(spark, spec, app_id, batch_id, batch, schema, committed)

    prepared = prepare_batch(spark, spec, schema, batch, raw_format, reader_options, gate)
    try:
        stats = prepared.stats
        if stats.rows == 0:
            return BatchResult(spec.name, app_id, batch_id, "empty", note="empty batch, no commit")
        if prepared.gate is not None and should_stop(prepared.gate):
            record(spark, _gate_results(spec, app_id, batch_id, prepared.gate), txn=None)
            raise ExpectationFailedError(stop_message(prepared.gate, spec.name, app_id, batch_id))
        ingested_at = datetime.now(UTC)
        meta = CommitMetadata(
            app_id=app_id,
            batch_id=batch_id,
            source={**files_source(stats.files), **(source or {})},
            rows_read=stats.rows,
            rows_quarantined=stats.rows_rejected,
            content_hash=stats.content_hash,
            commit_token=uuid.uuid4().hex,
            checks=tuple(prepared.gate.records()) if prepared.gate is not None else (),
        )
        rows = prepared.rows
        if stats.rows_rejected:
            ensure_quarantine_table(spark, spec)
            rejected = rows.filter(F.col(REASON_COLUMN).isNotNull())
            write_quarantine(with_raw_record(rejected, schema), spec, app_id, batch_id, ingested_at)
        merge_source = with_lineage(
            rows.filter(landable_rows()).select(*landed_columns(schema, rows)),
            app_id,
            batch_id,
            ingested_at,
        )
        window = time_window(spec, schema, stats)
        condition = dedup_condition(spec.dedup, spec.keys, app_id, batch_id, window)
        return _merge_with_retries(spark, spec, meta, merge_source, condition, max_attempts)
    finally:
        prepared.classified.unpersist()


@dataclass(frozen=True)
class PreparedBatch:
    """A batch classified once (persisted), validated, with its figures: ready to write."""

    classified: DataFrame
    rows: DataFrame
    stats: BatchStats
    gate: GateOutcome | None


def prepare_batch(
    spark: SparkSession,
    spec: TableSpec,
    schema: StructType,
    batch: DataFrame,
    raw_format: str | None = None,
    reader_options: Mapping[str, str] | None = None,
    gate: ExpectationGate | None = None,
) -> PreparedBatch:
    """Classify and persist a batch, run its expectations, and count it: the same on every replay.

    The classified rows are persisted so every later step (validation, counts, quarantine, MERGE)
    sees the same rows, even from a non-deterministic source. The caller unpersists `classified`.
    """
    rows, read = with_rescued(batch, schema)
    try:
        classified = classify(
            rows, schema, spec.keys, raw_format, reader_options, spec.unknown_fields
        ).persist(StorageLevel.MEMORY_AND_DISK)
        stats = batch_stats(classified, schema, spec.dedup_column)
    finally:
        if read is not None:
            read.unpersist()
    try:
        if stats.undecodable_files:
            collapsed = one_row_per_undecodable_file(classified, stats.undecodable_files)
            collapsed = collapsed.persist(StorageLevel.MEMORY_AND_DISK)
            classified.unpersist()
            classified = collapsed
            stats = batch_stats(classified, schema, spec.dedup_column)
        if spec.unknown_fields == "fail":
            assert_nothing_rescued(classified, spec)
        if gate is None or stats.rows == stats.rows_rejected:
            return PreparedBatch(classified, classified, stats, None)
        landable = classified.filter(landable_rows()).select(*schema.fieldNames(), ROW_HASH_COLUMN)
        outcome = gate.validate(landable)
        reasons = quarantine_reasons(outcome)
        rows = with_gate_reasons(spark, classified, reasons)
        stats = replace(stats, rows_rejected=stats.rows_rejected + len(reasons))
        return PreparedBatch(classified, rows, stats, outcome)
    except BaseException:
        classified.unpersist()
        raise


def with_gate_reasons(
    spark: SparkSession, classified: DataFrame, reasons: Mapping[int, str]
) -> DataFrame:
    """Give landable rows a `quarantine` expectation rejected (by row hash) their reason."""
    if not reasons:
        return classified
    rejected = spark.createDataFrame(
        list(reasons.items()), f"{ROW_HASH_COLUMN} BIGINT, _lh_gate_reason STRING"
    )
    joined = classified.join(F.broadcast(rejected), on=ROW_HASH_COLUMN, how="left")
    reason = (
        F.when(landable_rows(), F.col("_lh_gate_reason"))
        .otherwise(F.col(REASON_COLUMN))
        .alias(REASON_COLUMN)
    )
    return joined.select(*[reason if c == REASON_COLUMN else F.col(c) for c in classified.columns])


def _gate_results(
    spec: TableSpec, app_id: str, batch_id: int, outcome: GateOutcome
) -> list[CheckResult]:
    return checks_from_ledger(spec.name, app_id, batch_id, None, tuple(outcome.records()))


def assert_batch_schema(actual: StructType, expected: StructType, table: str) -> None:
    """Raise SchemaMismatchError unless the batch has exactly the spec's columns and types."""
    data = [f for f in actual.fields if f.name not in READER_COLUMNS]
    problems = schema_differences(expected, StructType(data))
    known = {f.name.lower() for f in expected.fields}
    problems.extend(f"unexpected column {f.name}" for f in data if f.name.lower() not in known)
    if problems:
        raise SchemaMismatchError(
            f"batch for {table} does not match its schema: {'; '.join(problems)}"
        )


def rewound_message(table: str, app_id: str, batch_id: int, committed: int | None) -> str:
    """The one-line explanation for a stream that restarted below the log's marker."""
    return (
        f"app id {app_id!r}: the stream is at batch {batch_id} but table {table} already holds "
        f"batch {committed} for it, so its checkpoint was lost or rewound; start the pipeline "
        f"with a new app id (rows already landed are kept), or move the app's marker explicitly"
    )


def batch_stats(
    classified: DataFrame, schema: StructType, time_column: str | None = None
) -> BatchStats:
    """Count rows and rejected rows, hash the content, list source files, in one job.

    The hash is order-independent (a sum of per-row xxhash64 values with the row count), so the
    same rows give the same hash whatever the partitioning of a re-read. With `time_column`, the
    valid rows' newest value of that column comes along, as text in the session time zone.
    """
    aggregates = [
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.col(ROW_HASH_COLUMN).cast("decimal(38,0)")).alias("hash_sum"),
        F.sum(F.when(F.col(REASON_COLUMN).isNotNull(), 1).otherwise(0)).alias("rejected"),
    ]
    if COPY_COLUMN in classified.columns:
        aggregates.append(F.sum(F.col(COPY_COLUMN).cast("int")).alias("copies"))
    if SOURCE_FILE_COLUMN in classified.columns:
        aggregates.append(F.collect_set(SOURCE_FILE_COLUMN).alias("files"))
    if FAULT_COLUMN in classified.columns and SOURCE_FILE_COLUMN in classified.columns:
        # Rows of an undecodable file not yet collapsed to one row still carry their text.
        undecodable = (
            F.col(FAULT_COLUMN).startswith(UNDECODABLE_PREFIX) & F.col(CORRUPT_COLUMN).isNotNull()
        )
        aggregates.append(
            F.collect_set(F.when(undecodable, F.col(SOURCE_FILE_COLUMN))).alias("undecodable")
        )
    if time_column is not None:
        pattern = "yyyy-MM-dd" if _is_date(schema, time_column) else "yyyy-MM-dd HH:mm:ss.SSSSSS"
        valid_time = F.when(F.col(REASON_COLUMN).isNull(), F.col(time_column))
        aggregates.append(F.date_format(F.max(valid_time), pattern).alias("newest"))
    row = classified.agg(*aggregates).collect()[0].asDict()
    rows = int(row["rows"])
    digest = hashlib.sha256(f"{rows}:{row['hash_sum']}".encode()).hexdigest()[:32]
    return BatchStats(
        rows=rows,
        rows_rejected=int(row["rejected"] or 0),
        rows_copies=int(row.get("copies") or 0),
        content_hash=digest,
        files=tuple(sorted(row.get("files") or ())),
        newest_time=row.get("newest"),
        undecodable_files=tuple(sorted(row.get("undecodable") or ())),
    )


def time_window(spec: TableSpec, schema: StructType, stats: BatchStats) -> TimeWindow | None:
    """The MERGE window of a `window`-scoped spec, ending at the batch's newest time, if any."""
    if spec.dedup != "window" or stats.newest_time is None:
        return None
    if spec.dedup_column is None or spec.dedup_window is None:
        return None
    return TimeWindow(
        column=spec.dedup_column,
        is_date=_is_date(schema, spec.dedup_column),
        newest=stats.newest_time,
        seconds=int(spec.dedup_window.total_seconds()),
    )


def _is_date(schema: StructType, column: str) -> bool:
    return schema[column].dataType.typeName() == "date"


def files_source(files: tuple[str, ...]) -> dict[str, Any]:
    """The ledger's source record for a batch read from files (empty when not from files)."""
    return {"kind": "files", "files": list(files)} if files else {}


def with_lineage(rows: DataFrame, app_id: str, batch_id: int, ingested_at: datetime) -> DataFrame:
    """Prefix the lineage columns: app id, batch id and the batch's ingestion time."""
    return rows.select(
        F.lit(app_id).alias(APP_ID_COLUMN),
        F.lit(batch_id).cast("bigint").alias(BATCH_ID_COLUMN),
        F.lit(ingested_at).cast("timestamp").alias(INGESTED_AT_COLUMN),
        *rows.columns,
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


def _skip_committed(
    spark: SparkSession,
    spec: TableSpec,
    app_id: str,
    batch_id: int,
    batch: DataFrame,
    schema: StructType,
    committed: int | None,
) -> BatchResult:
    entry = find_ledger_entry(spark, spec.name, app_id, batch_id)
    note = f"already committed (log marker for {app_id} is {committed})"
    if entry is None:
        return BatchResult(
            spec.name,
            app_id,
            batch_id,
            "skipped",
            note=f"{note}; ledger entry no longer in history, content not verified",
        )
    rows, read = with_rescued(batch, schema)
    classified = classify_rows(rows, schema, spec.keys).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        incoming = batch_stats(classified, schema)
        if read is not None:
            read.unpersist()
        if incoming.undecodable_files:
            collapsed = one_row_per_undecodable_file(
                classified.withColumn(COPY_COLUMN, F.lit(False)), incoming.undecodable_files
            )
            incoming = batch_stats(collapsed, schema)
    finally:
        classified.unpersist()
    if is_content_conflict(incoming.content_hash, entry.meta.content_hash):
        raise BatchContentMismatchError(
            f"batch {batch_id} of app id {app_id!r} is already committed in {spec.name} "
            f"(version {entry.version}) with content hash {entry.meta.content_hash}, but arrived "
            f"again with hash {incoming.content_hash}: the source changed under a committed batch"
        )
    return BatchResult(
        spec.name,
        app_id,
        batch_id,
        "skipped",
        rows_read=incoming.rows,
        version=entry.version,
        content_hash=incoming.content_hash,
        note=note,
    )


def _merge_with_retries(
    spark: SparkSession,
    spec: TableSpec,
    meta: CommitMetadata,
    merge_source: DataFrame,
    condition: str,
    max_attempts: int,
) -> BatchResult:
    for attempt in count(1):
        try:
            fault_point("before_write", meta.batch_id)
            with fault_during_write(
                "before_commit", meta.batch_id, lambda: table_detail(spark, spec.name).location
            ):
                executed = _merge(spark, spec.name, merge_source, condition, meta)
            fault_point("after_commit", meta.batch_id)
        except Exception as exc:
            error = error_kind_of(exc)
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
    if not ours and is_content_conflict(meta.content_hash, entry.meta.content_hash):
        raise BatchContentMismatchError(
            f"batch {meta.batch_id} of app id {meta.app_id!r} was committed to {spec.name} by "
            f"another writer (version {entry.version}) with different content"
        )
    return result_from_entry(
        entry, spec.name, status="committed" if ours else "skipped", attempts=attempts, note=note
    )


def result_from_entry(
    entry: LedgerEntry, table: str, *, status: BatchStatus, attempts: int, note: str
) -> BatchResult:
    """Build the batch report from the ledger entry the log holds for it."""
    return BatchResult(
        table=table,
        app_id=entry.meta.app_id,
        batch_id=entry.meta.batch_id,
        status=status,
        rows_read=entry.meta.rows_read,
        rows_inserted=entry.rows_inserted if status == "committed" else 0,
        rows_already_present=entry.rows_already_present if status == "committed" else 0,
        rows_duplicate_in_batch=entry.rows_duplicate_in_batch if status == "committed" else 0,
        rows_quarantined=entry.meta.rows_quarantined if status == "committed" else 0,
        version=entry.version,
        content_hash=entry.meta.content_hash,
        attempts=attempts,
        note=note,
        checks=entry.meta.checks,
    )
