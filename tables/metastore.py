"""The Hive metastore's schema, made whole once, before any session's Hive client opens it.

Left to itself, the metastore (Spark's built-in Hive 2.3 client on DataNucleus) creates its
tables one by one as each is first needed, inside the transaction of the metastore call that
needs it, and adds their foreign keys on a second connection. On PostgreSQL that second
connection's `ALTER TABLE ... ADD CONSTRAINT ... REFERENCES "TBLS"` waits for the first
connection's row locks on `TBLS` (its `INSERT` of the table being created), and the first waits
for the second: the first `CREATE TABLE` hangs forever. So the first session creates every table
of the metastore's model up front, with DataNucleus' own schema creation on a connection of its
own and no metastore transaction open, and then lets its Hive client start (which adds the
`default` database and DataNucleus' `SEQUENCE_TABLE`). Later sessions find the schema whole and
their Hive clients never issue DDL.

Concurrent first use is serialised by a PostgreSQL advisory lock held on a JDBC connection of the
session's JVM: a second process waits, then finds the schema whole. The lock goes with the
connection, so a process that dies while holding it does not block the others.

The model (table names and classes) comes from `package.jdo` in the metastore JAR on the class
path, so the schema is always the one the running Hive client expects; no SQL script is needed
(Hive's `schematool` scripts are not in PySpark's JARs).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JJavaError

from tables.errors import SessionError, first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The advisory lock key of the schema creation ("lakehous" in ASCII: one key for this project).
SCHEMA_LOCK_KEY = 0x6C616B65686F7573
#: How long a process waits for another one that is creating the schema.
SCHEMA_LOCK_TIMEOUT_SECONDS = 300
#: DataNucleus' table of id counters, which it creates on first insert (Hive's `default`
#: database): not in the model, so it says the first start got that far.
SEQUENCE_TABLE = "SEQUENCE_TABLE"
_MODEL_CLASS = "org.apache.hadoop.hive.metastore.model.MTable"
_HIVE_CONF = "org.apache.hadoop.hive.conf.HiveConf"


@dataclass(frozen=True)
class MetastoreModel:
    """The persistent classes of the metastore and the tables they map to (from package.jdo)."""

    classes: tuple[str, ...]
    tables: frozenset[str]

    @classmethod
    def parse(cls, package_jdo: bytes) -> MetastoreModel:
        """Read the model from a JDO metadata file: class names, and their own and join tables.

        Embedded-only classes have no table of their own. Names are compared upper-case, as
        DataNucleus' `datanucleus1` identifier factory (Hive's) creates them.
        """
        root = ET.fromstring(package_jdo)
        classes: list[str] = []
        tables: set[str] = set()
        for package in root.iter("package"):
            for model in package.iter("class"):
                classes.append(f"{package.get('name')}.{model.get('name')}")
                if model.get("table") and model.get("embedded-only") != "true":
                    tables.add(str(model.get("table")).upper())
                tables.update(
                    str(field.get("table")).upper()
                    for field in model.iter("field")
                    if field.get("table")
                )
        if not classes:
            raise SessionError("the metastore JAR's package.jdo declares no persistent classes")
        return cls(tuple(classes), frozenset(tables))

    def is_complete(self, existing: set[str], has_default_database: bool) -> bool:
        """True when every table of the model and DataNucleus' counters exist, and `default`."""
        return self.tables | {SEQUENCE_TABLE} <= existing and has_default_database


@contextmanager
def schema_ready(spark: SparkSession) -> Iterator[None]:
    """Make the metastore's schema whole, then run the block (the Hive client's start).

    If the schema is incomplete, the block runs under the schema lock too, so that the Hive
    client's own first writes (the `default` database) are not raced either.
    """
    jvm = spark._jvm
    if jvm is None:
        raise SessionError("the Hive metastore catalog needs a classic Spark session (py4j)")
    properties = _datanucleus_properties(spark, jvm)
    url = str(properties.get("javax.jdo.option.ConnectionURL"))
    model = MetastoreModel.parse(_package_jdo(jvm))
    connection = _connect(jvm, properties)
    try:
        if model.is_complete(*_existing(connection)):
            yield
            return
        _lock(connection, url)
        if not model.tables | {SEQUENCE_TABLE} <= _existing(connection)[0]:
            _create_schema(jvm, properties, model)
        yield
    finally:
        connection.close()


def _datanucleus_properties(spark: SparkSession, jvm: Any) -> Any:
    """The DataNucleus and JDO settings the session's Hive client will use (a HiveConf view).

    HiveConf supplies Hive's defaults (its identifier factory and value strategy decide the
    table and column names); the session's Hadoop configuration supplies the connection.
    """
    hive_conf_class = jvm.java.lang.Class.forName(_HIVE_CONF)
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf(
        spark.sparkContext._jsc.hadoopConfiguration(), hive_conf_class
    )
    properties = jvm.java.util.Properties()
    properties.putAll(conf.getValByRegex("datanucleus|jdo"))
    return properties


def _package_jdo(jvm: Any) -> bytes:
    """The JDO metadata of the metastore JAR the session's Hive client loads its model from."""
    model_class = jvm.java.lang.Class.forName(_MODEL_CLASS)
    jar = str(model_class.getProtectionDomain().getCodeSource().getLocation().getPath())
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read("package.jdo")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise SessionError(f"cannot read package.jdo from the metastore JAR {jar}: {exc}") from exc


def _connect(jvm: Any, properties: Any) -> Any:
    """A JDBC connection of the session's JVM to the metastore database, in autocommit."""
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


def _query_one(connection: Any, sql: str) -> str | None:
    statement = connection.createStatement()
    try:
        rows = statement.executeQuery(sql)
        return str(rows.getString(1)) if rows.next() and rows.getString(1) is not None else None
    finally:
        statement.close()


def _existing(connection: Any) -> tuple[set[str], bool]:
    """The upper-cased tables of the connection's schema, and whether `default` is in DBS."""
    names = _query_one(
        connection,
        "SELECT string_agg(upper(table_name), ',') FROM information_schema.tables "
        "WHERE table_schema = current_schema()",
    )
    existing = set(names.split(",")) if names else set()
    if "DBS" not in existing:
        return existing, False
    defaults = _query_one(connection, """SELECT count(*) FROM "DBS" WHERE "NAME" = 'default'""")
    return existing, defaults not in (None, "0")


def _lock(connection: Any, url: str) -> None:
    """Take the schema lock for the connection's life, or fail after the lock timeout."""
    statement = connection.createStatement()
    try:
        statement.execute(f"SET lock_timeout = '{SCHEMA_LOCK_TIMEOUT_SECONDS}s'")
        statement.execute(f"SELECT pg_advisory_lock({SCHEMA_LOCK_KEY})")
    except Exception as exc:
        if "lock timeout" in str(exc):
            raise SessionError(
                f"the Hive metastore at {url}: another process has held the schema lock for "
                f"{SCHEMA_LOCK_TIMEOUT_SECONDS} s (pg_advisory_lock({SCHEMA_LOCK_KEY})); "
                "see pg_stat_activity"
            ) from exc
        raise
    finally:
        statement.close()


def _create_schema(jvm: Any, properties: Any, model: MetastoreModel) -> None:
    """Create every missing table, column and constraint of the model (DataNucleus' own DDL)."""
    settings = jvm.java.util.Properties()
    settings.putAll(properties)
    settings.setProperty("datanucleus.schema.autoCreateAll", "true")
    settings.setProperty("datanucleus.connectionPoolingType", "None")
    classes = jvm.java.util.HashSet()
    for name in model.classes:
        classes.add(name)
    factory = jvm.javax.jdo.JDOHelper.getPersistenceManagerFactory(settings)
    try:
        store = factory.getNucleusContext().getStoreManager()
        store.createSchemaForClasses(classes, jvm.java.util.Properties())
    finally:
        factory.close()
