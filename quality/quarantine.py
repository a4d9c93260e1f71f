"""Rows that cannot land go to `<table>_quarantine` with a reason, idempotently per batch.

Every row of a batch is classified before anything is written: a row gets a rejection reason or
none, from the row alone, so a replay of the same batch puts each row on the same side. The
quarantine append carries Delta's per-write txnAppId/txnVersion options (per write, not session
wide), so a quarantine write that landed before a crash is skipped on replay: no row lands twice
and no row lands in both tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from quality.marker_names import batch_markers
from tables.delta.table import create_table, table_detail
from tables.faults import fault_during_write
from tables.spec import (
    APP_ID_COLUMN,
    BATCH_ID_COLUMN,
    INGESTED_AT_COLUMN,
    LINEAGE_DDL,
    parse_struct,
)

if TYPE_CHECKING:
    from datetime import datetime

    from pyspark.sql import DataFrame, SparkSession

    from tables.spec import TableSpec

REASON_COLUMN = "_lh_reason"
RAW_COLUMN = "_lh_raw"
SOURCE_COLUMN = "_lh_source"
#: The exact bytes of a record that is not UTF-8 (its `_lh_raw` is NULL then), else NULL.
RAW_BYTES_COLUMN = "_lh_raw_bytes"
QUARANTINE_DDL = (
    f"{LINEAGE_DDL}, {REASON_COLUMN} STRING NOT NULL, {RAW_COLUMN} STRING, {SOURCE_COLUMN} STRING, "
    f"{RAW_BYTES_COLUMN} BINARY"
)


def ensure_quarantine_table(spark: SparkSession, spec: TableSpec) -> bool:
    """Create the spec's quarantine table if absent; True if this call created it."""
    return create_table(
        spark,
        spec.quarantine_name,
        parse_struct(QUARANTINE_DDL),
        properties={"delta.enableChangeDataFeed": "true"},
        addable=(RAW_BYTES_COLUMN,),
    )


def ensure_dead_letter_table(spark: SparkSession, table: str) -> bool:
    """Create a routed pipeline's dead-letter table (quarantine-shaped) if absent."""
    return create_table(
        spark,
        table,
        parse_struct(QUARANTINE_DDL),
        properties={"delta.enableChangeDataFeed": "true"},
        addable=(RAW_BYTES_COLUMN,),
    )


def write_quarantine(
    rejected: DataFrame,
    spec: TableSpec,
    app_id: str,
    batch_id: int,
    ingested_at: datetime,
) -> None:
    """Append rejected rows (reason, raw, source, raw bytes columns) once per (app id, batch id).

    The caller has classified the batch, added the raw records and counted the rows already;
    this only writes.
    """
    marker = batch_markers(spec.name, app_id)[1]
    append_rejected(rejected, marker.table, (marker.txn_app_id, app_id), batch_id, ingested_at)


def append_rejected(
    rejected: DataFrame,
    table: str,
    txn: tuple[str, str],
    batch_id: int,
    ingested_at: datetime,
) -> None:
    """Append rows with their reasons to a quarantine-shaped table once per batch.

    `txn` is the txnAppId the append carries and the app id its rows name: Delta skips an
    append whose txnVersion the table's marker already holds, so a re-run writes nothing twice.
    """
    txn_app_id, app_id = txn
    rows = rejected.select(
        F.lit(app_id).alias(APP_ID_COLUMN),
        F.lit(batch_id).cast("bigint").alias(BATCH_ID_COLUMN),
        F.lit(ingested_at).cast("timestamp").alias(INGESTED_AT_COLUMN),
        F.col(REASON_COLUMN),
        F.col(RAW_COLUMN),
        F.col(SOURCE_COLUMN),
        F.col(RAW_BYTES_COLUMN),
    )

    def location() -> str:
        return table_detail(rejected.sparkSession, table).location

    with fault_during_write("mid_quarantine", batch_id, location):
        (
            rows.write.format("delta")
            .mode("append")
            .option("txnAppId", txn_app_id)
            .option("txnVersion", batch_id)
            .saveAsTable(table)
        )
