"""The JAR caches: the Delta JARs an embedded session resolved are remembered for `serve`."""

from __future__ import annotations

from pyspark.sql import SparkSession

from tables.engine.connectors import cached_delta_jars, driver_jars, resolved_jars


def test_a_session_that_sets_spark_jars_still_names_the_resolved_delta_jars(
    spark: SparkSession,
) -> None:
    # The test session sets spark.jars itself (the guard, the Kafka connector).
    assert "lakehouse-classes" in spark.sparkContext.getConf().get("spark.jars", "")
    names = [jar.name for jar in driver_jars(resolved_jars(spark))]
    assert any(name.startswith("io.delta_delta-spark_") for name in names), names


def test_the_resolved_delta_jars_are_remembered_for_the_jdbc_server(spark: SparkSession) -> None:
    remembered = cached_delta_jars()
    assert remembered is not None, "no Delta JARs remembered: `lakehouse serve` cannot start"
    assert any(jar.name.startswith("io.delta_delta-spark_") for jar in remembered)
    assert all(jar.is_file() for jar in remembered)
