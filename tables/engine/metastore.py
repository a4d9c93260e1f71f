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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tables.engine.jvm import hive
from tables.errors import SessionError

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
    client's own first writes (the `default` database) are not raced either. The JDBC connection,
    the lock and DataNucleus' schema creation live in the session's JVM (`tables.engine.jvm.hive`).
    """

    properties = hive.datanucleus_properties(spark)
    url = str(properties.get("javax.jdo.option.ConnectionURL"))
    model = MetastoreModel.parse(hive.package_jdo(spark, _MODEL_CLASS))
    connection = hive.connect(spark, properties)
    try:
        if model.is_complete(*existing_tables(connection)):
            yield
            return
        hive.lock(connection, url, SCHEMA_LOCK_KEY, SCHEMA_LOCK_TIMEOUT_SECONDS)
        if not model.tables | {SEQUENCE_TABLE} <= existing_tables(connection)[0]:
            hive.create_schema(spark, properties, model.classes)
        yield
    finally:
        connection.close()


def existing_tables(connection: Any) -> tuple[set[str], bool]:
    """The upper-cased tables of the connection's schema, and whether `default` is in DBS."""

    names = hive.query_one(
        connection,
        "SELECT string_agg(upper(table_name), ',') FROM information_schema.tables "
        "WHERE table_schema = current_schema()",
    )
    existing = set(names.split(",")) if names else set()
    if "DBS" not in existing:
        return existing, False
    defaults = hive.query_one(connection, """SELECT count(*) FROM "DBS" WHERE "NAME" = 'default'""")
    return existing, defaults not in (None, "0")
