"""The Hive metastore's database, reached the way the session's own Hive client reaches it.

`tables.engine.metastore` makes the metastore's schema whole before the Hive client starts. The
settings (HiveConf's defaults and the session's Hadoop configuration), the JDBC driver, and
DataNucleus' schema creation all live in the session's JVM, so the connection, the lock and the DDL
are made there.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JJavaError

from tables.engine.jvm import gateway, hadoop_configuration
from tables.errors import SessionError, first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_OPERATION = "the Hive metastore catalog"
_HIVE_CONF = "org.apache.hadoop.hive.conf.HiveConf"


def datanucleus_properties(spark: SparkSession) -> Any:
    """The DataNucleus and JDO settings the session's Hive client will use (a HiveConf view).

    HiveConf supplies Hive's defaults (its identifier factory and value strategy decide the
    table and column names); the session's Hadoop configuration supplies the connection.
    """
    jvm = gateway(spark, _OPERATION)
    hive_conf_class = jvm.java.lang.Class.forName(_HIVE_CONF)
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf(
        hadoop_configuration(spark, _OPERATION), hive_conf_class
    )
    properties = jvm.java.util.Properties()
    properties.putAll(conf.getValByRegex("datanucleus|jdo"))
    return properties


def package_jdo(spark: SparkSession, model_class: str) -> bytes:
    """The JDO metadata of the metastore JAR the session's Hive client loads its model from."""
    found = gateway(spark, _OPERATION).java.lang.Class.forName(model_class)
    jar = str(found.getProtectionDomain().getCodeSource().getLocation().getPath())
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read("package.jdo")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise SessionError(f"cannot read package.jdo from the metastore JAR {jar}: {exc}") from exc


def connect(spark: SparkSession, properties: Any) -> Any:
    """A JDBC connection of the session's JVM to the metastore database, in autocommit."""
    jvm = gateway(spark, _OPERATION)
    jvm.java.lang.Class.forName(properties.getProperty("javax.jdo.option.ConnectionDriverName"))
    login = jvm.java.util.Properties()
    for key, name in (("UserName", "user"), ("Password", "password")):
        value = properties.getProperty(f"javax.jdo.option.Connection{key}")
        if value is not None:
            login.setProperty(name, value)
    url = properties.getProperty("javax.jdo.option.ConnectionURL")
    try:
        return jvm.java.sql.DriverManager.getConnection(url, login)
    except Py4JJavaError as exc:
        # The driver's own message says what is wrong (refused password, no server, no database).
        reason = first_line(Exception(exc.java_exception.getMessage() or exc.java_exception))
        raise SessionError(
            f"the Hive metastore at {url} cannot be reached or opened ({reason[:200]}); "
            "check [lakehouse.catalog] in the config"
        ) from exc


def query_one(connection: Any, sql: str) -> str | None:
    """The first column of the first row of a query on the connection, as text."""
    statement = connection.createStatement()
    try:
        rows = statement.executeQuery(sql)
        return str(rows.getString(1)) if rows.next() and rows.getString(1) is not None else None
    finally:
        statement.close()


def lock(connection: Any, url: str, key: int, timeout_seconds: int) -> None:
    """Take a PostgreSQL advisory lock for the connection's life, or fail after the timeout."""
    statement = connection.createStatement()
    try:
        statement.execute(f"SET lock_timeout = '{int(timeout_seconds)}s'")
        statement.execute(f"SELECT pg_advisory_lock({int(key)})")
    except Exception as exc:
        if "lock timeout" in str(exc):
            raise SessionError(
                f"the Hive metastore at {url}: another process has held the schema lock for "
                f"{timeout_seconds} s (pg_advisory_lock({key})); see pg_stat_activity"
            ) from exc
        raise
    finally:
        statement.close()


def create_schema(spark: SparkSession, properties: Any, classes: Iterable[str]) -> None:
    """Create every missing table, column and constraint of the classes (DataNucleus' own DDL)."""
    jvm = gateway(spark, _OPERATION)
    settings = jvm.java.util.Properties()
    settings.putAll(properties)
    settings.setProperty("datanucleus.schema.autoCreateAll", "true")
    settings.setProperty("datanucleus.connectionPoolingType", "None")
    names = jvm.java.util.HashSet()
    for name in classes:
        names.add(name)
    factory = jvm.javax.jdo.JDOHelper.getPersistenceManagerFactory(settings)
    try:
        store = factory.getNucleusContext().getStoreManager()
        store.createSchemaForClasses(names, jvm.java.util.Properties())
    finally:
        factory.close()
