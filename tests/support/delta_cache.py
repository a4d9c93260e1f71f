"""Forgetting the Delta logs a test session's JVM has cached, as a new process would start."""

from __future__ import annotations

from pyspark.sql import SparkSession

from tables.engine.jvm import gateway


def clear_log_cache(spark: SparkSession) -> None:
    """Drop every cached DeltaLog: the next read lists and reads the log files afresh."""
    gateway(spark, "clearing Delta's log cache").org.apache.spark.sql.delta.DeltaLog.clearCache()
