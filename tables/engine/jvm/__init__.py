"""The JVM boundary: the one place that reaches into a classic session's py4j gateway.

Everything else in the project goes through public APIs (SQL, DataFrames, Structured Streaming),
which work on a classic session and over Spark Connect alike. What no public API does is in this
package, one module per concern, each function saying why Python cannot do it: reading Delta's
markers and newest commit without a Spark job, its files' statistics, and committing bare
markers (`delta`), Hadoop file systems (`files`), Kafka's admin client (`kafka`), the Hive
metastore's schema (`hive`) and the JDBC server (`servers`). The private attributes of PySpark's
classic objects are read here only. On a Spark Connect session each of these raises
ClassicOnlyError, one line naming the operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark import SparkContext
from pyspark.sql.session import SparkSession as ClassicSession
from pyspark.sql.session import SparkSession as Session

from tables.errors import ClassicOnlyError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def is_classic(spark: SparkSession) -> bool:
    """True for a classic session (a JVM in this process), False for a Spark Connect one."""
    return isinstance(spark, ClassicSession)


def gateway(spark: SparkSession, operation: str) -> Any:
    """The session's py4j JVM view, or ClassicOnlyError naming `operation` over Spark Connect."""
    if not is_classic(spark):
        raise ClassicOnlyError(
            f"{operation} needs a classic Spark session (the JVM in this process); it is not "
            "available over Spark Connect: run it without --remote"
        )
    return spark._jvm


def java_session(spark: SparkSession, operation: str) -> Any:
    """The session's JVM SparkSession (classic only)."""
    gateway(spark, operation)
    return spark._jsparkSession


def hadoop_configuration(spark: SparkSession, operation: str) -> Any:
    """The session's Hadoop configuration in the JVM (classic only)."""
    gateway(spark, operation)
    return spark.sparkContext._jsc.hadoopConfiguration()


def clone_classic(spark: SparkSession) -> SparkSession:
    """A classic session's clone, SQL confs and temp views included (`cloneSession` is private)."""

    return Session(spark.sparkContext, java_session(spark, "cloning a session").cloneSession())


def classic_session_id(spark: SparkSession) -> str:
    """The JVM session's own id (`sessionUUID`), the same through every Python wrapper of it."""
    return str(java_session(spark, "naming a session").sessionUUID())


def classic_confs_hash(spark: SparkSession) -> int:
    """The hash of the JVM session's SQL confs, in three py4j calls (`conf.getAll`: dozens)."""
    return int(java_session(spark, "reading a session's confs").conf().getAll().hashCode())


#: py4j's and the socket's errors once the JVM on the other end of the gateway is gone.
_LOST_JVM = frozenset({"Py4JNetworkError", "ConnectionRefusedError", "ConnectionResetError"})


def is_jvm_lost(exc: BaseException) -> bool:
    """True if an error (or one it chains from) says the driver JVM is gone, not that it failed."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if type(seen).__name__ in _LOST_JVM or "Answer from Java side is empty" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_jvm_running() -> bool:
    """True if this process has launched its gateway JVM (a stopped session keeps it)."""

    return SparkContext._gateway is not None


def stop_active_context() -> None:
    """Stop this process's SparkContext if one runs (its servers talk to the JVM until then)."""

    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()


def gateway_process(spark: SparkSession) -> Any:
    """The `Popen` of the session's gateway JVM: its exit is this process's to wait for."""
    gateway(spark, "waiting for the driver JVM")
    return getattr(spark.sparkContext._gateway, "proc", None)


def code_compilations(spark: SparkSession) -> int:
    """How many generated classes this driver JVM has compiled (Spark's CodegenMetrics).

    Spark counts its compilations only in a metrics source, which no Python API reads; `make
    bench` reports them per stream batch to show the compiled-code cache holding a batch's plans.
    """
    metrics = gateway(spark, "counting compiled code").org.apache.spark.metrics.source
    return int(metrics.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def estimated_bytes(frame: DataFrame) -> int | None:
    """Spark's estimate of a DataFrame's size in bytes, from its optimizer's statistics.

    None over Spark Connect. No public API returns a plan's statistics (`EXPLAIN COST` prints
    them as text); a commit sizes a batch's tasks by them (`ingest.decisions.is_one_task_batch`).
    A source that cannot tell its size (Kafka) reports Spark's default, which is very large.
    """
    if not is_classic(frame.sparkSession):
        return None
    return int(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
