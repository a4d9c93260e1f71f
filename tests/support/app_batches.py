"""Small committed batches of app `app` (two rows each), for tests of what the log then says."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

EVENT_DDL = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"


def two_rows(spark: SparkSession, batch_id: int) -> DataFrame:
    """Batch `batch_id`'s rows: events `e<id>a` and `e<id>b`."""
    return spark.createDataFrame(
        [(f"e{batch_id}a", "u", 1.0), (f"e{batch_id}b", "u", 2.0)], EVENT_DDL
    )


def with_batches(spark: SparkSession, spec: TableSpec, *batch_ids: int) -> TableSpec:
    """`spec`'s table with batches `batch_ids` of app `app` committed (two rows each)."""
    for batch_id in batch_ids:
        commit_batch(TableWriter(spark, spec, "app"), batch_id, two_rows(spark, batch_id))
    return spec
