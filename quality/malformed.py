"""Classify each input row as landable or rejected, with a reason, from the row alone.

A row is rejected if the reader could not parse it against the table schema (the reader's
corrupt-record column is set), if a record key column is null, or if a column the schema declares
NOT NULL is null. The decision depends on nothing but the row, so it is the same on every replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from quality.quarantine import RAW_COLUMN, REASON_COLUMN, SOURCE_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

CORRUPT_COLUMN = "_lh_corrupt"
SOURCE_FILE_COLUMN = "_lh_source_file"


def rejection_reason(schema: StructType, keys: tuple[str, ...], columns: list[str]) -> Column:
    """A string column: why the row cannot land, or null if it can.

    `columns` are the columns present in the batch; the corrupt-record column is used when the
    reader provided one.
    """
    reason: Column | None = None

    def add(condition: Column, text: str) -> None:
        nonlocal reason
        reason = (
            F.when(condition, F.lit(text))
            if reason is None
            else reason.when(condition, F.lit(text))
        )

    if CORRUPT_COLUMN in columns:
        add(F.col(CORRUPT_COLUMN).isNotNull(), "malformed record: does not parse with the schema")
    for key in keys:
        add(F.col(key).isNull(), f"missing record key: {key} is null")
    for column in schema.fields:
        if not column.nullable and column.name not in keys:
            add(F.col(column.name).isNull(), f"missing required field: {column.name} is null")
    return reason if reason is not None else F.lit(None).cast("string")


def classify(batch: DataFrame, schema: StructType, keys: tuple[str, ...]) -> DataFrame:
    """Add the reason, raw-record and source columns used by both the target and quarantine."""
    data_columns = [f.name for f in schema.fields]
    columns = batch.columns
    raw_json = F.to_json(F.struct(*[F.col(c) for c in data_columns]))
    raw = F.coalesce(F.col(CORRUPT_COLUMN), raw_json) if CORRUPT_COLUMN in columns else raw_json
    source = F.col(SOURCE_FILE_COLUMN) if SOURCE_FILE_COLUMN in columns else F.lit(None)
    return batch.select(
        *[F.col(c) for c in columns],
        rejection_reason(schema, keys, columns).alias(REASON_COLUMN),
        raw.alias(RAW_COLUMN),
        source.cast("string").alias(SOURCE_COLUMN),
    )
