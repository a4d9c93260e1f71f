"""Preparing a batch for its commit: classify and persist it once, validate, count and hash it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ingest.decisions import TimeWindow
from quality.expectations import quarantine_reasons
from quality.fates import (
    assert_nothing_rescued,
    one_row_per_undecodable_file,
    undecodable_files,
)
from quality.malformed import COPY_COLUMN, ROW_HASH_COLUMN, RecordFormat, classify, landable_rows
from quality.quarantine import REASON_COLUMN
from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    MAGIC_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    SOURCE_FILE_COLUMN,
    with_rescued,
)
from tables.delta.table import schema_differences
from tables.errors import SchemaMismatchError
from tables.spec import (
    APP_ID_COLUMN,
    BATCH_ID_COLUMN,
    INGESTED_AT_COLUMN,
    RESCUED_COLUMN,
    TableSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ingest.commit.options import CommitOptions
    from quality.expectations import GateOutcome
#: The one-row relation a small batch's lineage stamp comes from (`with_lineage`).
_STAMP_BATCH = "_lh_stamp_batch_id"
_STAMP_TIME = "_lh_stamp_ingested_at"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
READER_COLUMNS = (
    CORRUPT_COLUMN,
    SOURCE_FILE_COLUMN,
    RECORD_COLUMN,
    FAULT_COLUMN,
    RESCUED_COLUMN,
    RESCUE_INPUT_COLUMN,
    MAGIC_COLUMN,
)


@dataclass(frozen=True)
class BatchStats:
    """The figures of one batch gathered in a single aggregation job."""

    rows: int
    rows_rejected: int
    content_hash: str
    files: tuple[str, ...]
    rows_copies: int = 0
    newest_time: str | None = None
    magic_files: tuple[str, ...] = ()
    key_bounds: tuple[tuple[str, Any, Any], ...] = ()


@dataclass(frozen=True)
class PreparedBatch:
    """A batch classified once (persisted), validated, with its figures: ready to write."""

    classified: DataFrame
    rows: DataFrame
    stats: BatchStats
    gate: GateOutcome | None
    schema: StructType
    one_task: bool = False
    """Classified, persisted and counted by one task (`is_one_task_batch`)."""


def prepare_batch(
    spec: TableSpec,
    schema: StructType,
    batch: DataFrame,
    options: CommitOptions,
    *,
    one_task: bool = False,
) -> PreparedBatch:
    """Classify and persist a batch, run its expectations, and count it: the same on every replay.

    The classified rows are persisted so every later step (validation, counts, quarantine, MERGE)
    sees the same rows, even from a non-deterministic source. The caller unpersists `classified`.
    `options` says how the batch was read (its corrupt text's format) and its expectation gate;
    `one_task` classifies, persists and counts a small batch in one task (one stage, one file).
    """
    spark, gate = batch.sparkSession, options.gate
    rows = with_rescued(batch, schema)
    read = RecordFormat(options.raw_format, options.reader_options)
    classified = classify(rows, spec, schema, read, one_task=one_task)
    classified = classified.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        stats = batch_stats(classified, schema, spec.dedup_column, spec.keys)
    except BaseException:
        classified.unpersist()
        raise
    try:
        undecodable = undecodable_files(spark, stats.magic_files) if stats.magic_files else {}
        if undecodable:
            collapsed = one_row_per_undecodable_file(classified, undecodable)
            collapsed = collapsed.persist(StorageLevel.MEMORY_AND_DISK)
            classified.unpersist()
            classified = collapsed
            stats = batch_stats(classified, schema, spec.dedup_column, spec.keys)
        if spec.unknown_fields == "fail":
            assert_nothing_rescued(classified, spec)
        if gate is None or stats.rows == stats.rows_rejected:
            return PreparedBatch(classified, classified, stats, None, schema, one_task)
        landable = classified.filter(landable_rows()).select(*schema.fieldNames(), ROW_HASH_COLUMN)
        outcome = gate.validate(landable)
        reasons = quarantine_reasons(outcome)
        rows = with_gate_reasons(spark, classified, reasons)
        stats = replace(stats, rows_rejected=stats.rows_rejected + len(reasons))
        return PreparedBatch(classified, rows, stats, outcome, schema, one_task)
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


def batch_stats(
    classified: DataFrame,
    schema: StructType,
    time_column: str | None = None,
    keys: tuple[str, ...] = (),
) -> BatchStats:
    """Count rows and rejected rows, hash the content, list source files, in one job.

    The hash is order-independent (a sum of per-row xxhash64 values with the row count), so the
    same rows give the same hash whatever the partitioning of a re-read. With `time_column`, the
    valid rows' newest value of that column comes along, as text in the session time zone. With
    `keys`, each key column's min and max over the valid rows come along: the post-commit audit
    reads the table within them instead of reading the commit's rows again to find them.
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
    if MAGIC_COLUMN in classified.columns and SOURCE_FILE_COLUMN in classified.columns:
        # Files with a line that starts with a magic number: candidates for an undecodable file.
        magic = F.col(MAGIC_COLUMN).isNotNull()
        aggregates.append(F.collect_set(F.when(magic, F.col(SOURCE_FILE_COLUMN))).alias("magic"))
    if time_column is not None:
        pattern = "yyyy-MM-dd" if _is_date(schema, time_column) else "yyyy-MM-dd HH:mm:ss.SSSSSS"
        valid_time = F.when(F.col(REASON_COLUMN).isNull(), F.col(time_column))
        aggregates.append(F.date_format(F.max(valid_time), pattern).alias("newest"))
    for i, key in enumerate(keys):
        valid_key = F.when(F.col(REASON_COLUMN).isNull(), F.col(key))
        aggregates.append(F.min(valid_key).alias(f"key_min_{i}"))
        aggregates.append(F.max(valid_key).alias(f"key_max_{i}"))
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
        magic_files=tuple(sorted(row.get("magic") or ())),
        key_bounds=tuple((k, row[f"key_min_{i}"], row[f"key_max_{i}"]) for i, k in enumerate(keys)),
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


def with_lineage(
    rows: DataFrame,
    app_id: str,
    batch_id: int,
    ingested_at: datetime,
    *,
    stamp_joined: bool = False,
) -> DataFrame:
    """Prefix the lineage columns: app id, batch id and the batch's ingestion time.

    Spark writes a long or timestamp literal into the generated code of the plan that holds it
    (a string goes into an array of references), so as literals the batch id and the time make
    every batch compile its own classes for the write (two, 6-10 ms each) and fill the
    compiled-code cache by two entries a batch. With `stamp_joined` both come from a one-row
    `VALUES` relation paired with each row (no job of its own) and the generated code is the
    same for every batch: what a small batch should do (its compile costs more than the pairing
    per row); a large batch keeps the literals (docs/benchmarks.md#compiled-code-cache).
    """
    source, stamp_batch, stamp_time = (
        rows,
        F.lit(batch_id).cast("bigint"),
        F.lit(ingested_at).cast("timestamp"),
    )
    if stamp_joined:
        micros = (ingested_at - _EPOCH) // timedelta(microseconds=1)  # exact, as PySpark's literal
        stamp = rows.sparkSession.sql(  # two integers, formatted: nothing from a record
            f"SELECT * FROM VALUES (CAST({int(batch_id)} AS BIGINT), timestamp_micros({micros})) "
            f"AS stamp({_STAMP_BATCH}, {_STAMP_TIME})"
        )
        # A product with the one row, task by task: a broadcast would collect it with a job.
        source = rows.crossJoin(stamp.hint("shuffle_replicate_nl"))
        stamp_batch, stamp_time = F.col(_STAMP_BATCH), F.col(_STAMP_TIME)
    return source.select(
        F.lit(app_id).alias(APP_ID_COLUMN),
        stamp_batch.alias(BATCH_ID_COLUMN),
        stamp_time.alias(INGESTED_AT_COLUMN),
        *[F.col(c) for c in rows.columns],
    )
