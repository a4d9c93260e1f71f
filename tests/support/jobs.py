"""Counting the Spark jobs an action starts, for tests that show a read needs none."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")


def spark_jobs(spark: SparkSession, action: Callable[[], T]) -> tuple[T, int]:
    """Run `action` in a job group of its own: its result and how many Spark jobs it started."""
    group = f"jobs-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, group)
    try:
        found = action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return found, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
