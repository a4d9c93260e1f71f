"""Skipping a batch the log already holds, after checking that its content did not change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from ingest.decisions import is_content_conflict, is_same_fingerprint
from ingest.isolation import recorded_culprits, without_culprits
from quality.fates import one_row_per_undecodable_file, undecodable_files
from quality.malformed import COPY_COLUMN, classify_rows
from quality.records import with_rescued
from tables.delta.history import find_ledger_entry
from tables.delta.writer import TableWriter
from tables.errors import BatchContentMismatchError

if TYPE_CHECKING:
    from ingest.commit.evolve import Evolved

from ingest.commit.batch_result import BatchResult
from ingest.commit.prepare import batch_stats


def skip_committed(
    writer: TableWriter,
    batch_id: int,
    arrived: Evolved,
    committed: int | None,
    source: Mapping[str, Any] | None = None,
) -> BatchResult:
    """Report a batch the log already holds, after checking that it arrived with the same content.

    When the source's record carries a fingerprint (files with their sizes and modification
    times, Kafka offset ranges, or a caller's own) equal to the one in the ledger entry, that
    settles it without reading the batch; otherwise the batch is classified and hashed again and
    the hash decides. `arrived` is the batch with the schema it landed with (the config's, and
    the columns the table gained under `add_columns`).
    """
    spark, spec, app_id = writer.spark, writer.spec, writer.app_id
    batch, schema = arrived.batch, arrived.schema
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
    if is_same_fingerprint(source, entry.meta.source):
        return BatchResult(
            spec.name,
            app_id,
            batch_id,
            "skipped",
            rows_read=entry.meta.rows_read,
            version=entry.version,
            content_hash=entry.meta.content_hash,
            note=f"{note}; same source fingerprint",
        )
    # Records its run isolated for crashing the reader are left out as its commit left them out.
    culprits = recorded_culprits(entry.meta.source)
    batch = without_culprits(spark, batch, schema.fieldNames(), culprits)
    rows = with_rescued(batch, schema)
    classified = classify_rows(rows, schema, spec.keys).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        incoming = batch_stats(classified, schema)
        undecodable = undecodable_files(spark, incoming.magic_files) if incoming.magic_files else {}
        if undecodable:
            collapsed = one_row_per_undecodable_file(
                classified.withColumn(COPY_COLUMN, F.lit(False)), undecodable
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
