"""Servers started inside the classic session's JVM: Spark's Thrift JDBC server, and the trust
the read-only guard gives the thread that registers tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tables.engine.confs import CUSTOM_AUTHENTICATION_CLASS, TOKEN_AUTHENTICATOR
from tables.engine.jvm import gateway, java_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def start_jdbc_server(spark: SparkSession) -> Any:
    """Start Spark's Thrift JDBC server (HiveServer2) on this session; return it, to stop it.

    `HiveThriftServer2.startWithContext` has no Python API. The server's host and port come from
    the session's `hive.server2.thrift.*`.
    """
    operation = "lakehouse serve (the JDBC server)"
    jvm = gateway(spark, operation)
    # Hive builds the login check from a new HiveConf, which sees system properties but not the
    # session's settings: the class is named there (a class name, not a secret).
    jvm.java.lang.System.setProperty(CUSTOM_AUTHENTICATION_CLASS, TOKEN_AUTHENTICATOR)
    server = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
    return server.startWithContext(java_session(spark, operation).sqlContext())


def trust_this_thread(spark: SparkSession) -> None:
    """Keep this Python thread's statements writable under a read-only server
    (`tables.engine.readonly`).

    PySpark pins each Python thread to one JVM thread, which is what the guard trusts; the guard
    is a JVM class, so the call is too.
    """
    gateway(spark, "trusting the server's own thread").lakehouse.ReadOnlyGuard.trustThisThread()
