"""The embedded catalog: a table is its warehouse directory, registered by name in each session.

Any number of processes share one lakehouse home. None of them holds a metastore lock: each
session keeps an in-memory catalog, and a name it does not know yet is looked up in the
warehouse directory (`<warehouse>/<table>` or `<warehouse>/<db>.db/<table>`, Spark's own managed
layout) and registered there as an external Delta table. Delta's log is what makes concurrent
writers safe; the catalog only maps names to locations, and every process derives the same map
from the same directories. docs/DESIGN.md says why this and not a Derby server or a metastore.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from tables.delta.ledger_view import create_ledger_view, ledger_view_name, should_have_ledger_view
from tables.engine.jvm.conditions import has_condition
from tables.engine.storage import child_names, local_path
from tables.identifiers import is_table_name, quote_identifier, sql_string_literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CATALOG_IMPLEMENTATION_CONF = "spark.sql.catalogImplementation"
WAREHOUSE_CONF = "spark.sql.warehouse.dir"
DEFAULT_DATABASE = "default"
_REGISTER_ATTEMPTS = 4


def is_warehouse_catalog(spark: SparkSession) -> bool:
    """True when the session's catalog is in memory, so the warehouse directory is the catalog."""
    return spark.conf.get(CATALOG_IMPLEMENTATION_CONF, "in-memory") == "in-memory"


def warehouse_dir(spark: SparkSession) -> str:
    """The session's warehouse location, as Spark holds it (a URI or a path)."""
    return str(spark.conf.get(WAREHOUSE_CONF)).rstrip("/")


def table_location(warehouse: str, name: str) -> str:
    """Where a table of that name lives under the warehouse: Spark's managed-table layout."""
    if "." in name:
        database, table = name.split(".", 1)
        if database.lower() != DEFAULT_DATABASE:
            return f"{warehouse}/{database.lower()}.db/{table.lower()}"
        name = table
    return f"{warehouse}/{name.lower()}"


def candidate_tables(warehouse: Path) -> list[str]:
    """Names of the directories under a local warehouse that hold a Delta log, sorted.

    `<warehouse>/<name>` is a table of the default database, `<warehouse>/<db>.db/<name>` one
    of database `db`. Directories whose names are not plain identifiers are left out.
    """
    if not warehouse.is_dir():
        return []
    found: list[str] = []
    for entry in warehouse.iterdir():
        if not entry.is_dir():
            continue
        if entry.name.endswith(".db"):
            database = entry.name[: -len(".db")]
            found.extend(
                f"{database}.{child.name}"
                for child in entry.iterdir()
                if (child / "_delta_log").is_dir()
            )
        elif (entry / "_delta_log").is_dir():
            found.append(entry.name)
    return sorted(name for name in found if is_table_name(name))


def remote_candidate_tables(spark: SparkSession, warehouse: str) -> list[str]:
    """`candidate_tables` for a warehouse on a store Hadoop reaches (`s3a://`): one listing
    per database directory and one per table's `_delta_log`."""
    found: list[str] = []
    for name in child_names(spark, warehouse):
        if name.endswith(".db"):
            database = name[: -len(".db")]
            found.extend(
                f"{database}.{child}"
                for child in child_names(spark, f"{warehouse}/{name}")
                if child_names(spark, f"{warehouse}/{name}/{child}/_delta_log")
            )
        elif child_names(spark, f"{warehouse}/{name}/_delta_log"):
            found.append(name)
    return sorted(name for name in found if is_table_name(name))


def has_commit(directory: Path) -> bool:
    """True if a local table directory's Delta log holds a commit or a checkpoint."""
    log = directory / "_delta_log"
    if (log / "_last_checkpoint").is_file():
        return True
    return any(entry.stem.isdigit() for entry in log.glob("*.json"))


def is_committed_table(spark: SparkSession, location: str) -> bool:
    """True if a Delta table with at least one commit lives at `location`.

    For a local directory the log is looked at directly: Delta's `isDeltaTable` answers from the
    JVM's cached log of that path, which does not see a first commit another process wrote
    after this process first looked (the loser of a creation race would wait forever). Another
    store is asked with DESCRIBE DETAIL, which reads the log again.
    """
    directory = local_path(location)
    if directory is not None:
        return has_commit(directory)
    try:
        spark.sql(f"DESCRIBE DETAIL delta.{quote_identifier(location)}").collect()
    except Exception as exc:
        if has_condition(exc, "DELTA_MISSING_DELTA_TABLE", "PATH_NOT_FOUND"):
            return False
        raise
    return True


def register(spark: SparkSession, name: str) -> bool:
    """Register `name` from its warehouse directory if Delta finds a table there; True if so.

    A directory whose log has no commit yet (a creator racing this call) is not a table yet.
    """
    location = table_location(warehouse_dir(spark), name)
    if not is_committed_table(spark, location):
        return False
    if "." in name:
        database = name.split(".", 1)[0]
        if database.lower() != DEFAULT_DATABASE:
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(database)}")
    statement = (
        f"CREATE TABLE IF NOT EXISTS {quote_identifier(name)} USING delta "
        f"LOCATION {sql_string_literal(location)}"
    )
    for attempt in range(_REGISTER_ATTEMPTS):
        try:
            spark.sql(statement)
            return True
        except Exception:
            # The table's first commits are still landing (another process is creating it):
            # Delta reports a concurrent protocol or metadata change. Look again shortly.
            if spark.catalog.tableExists(name):
                return True
            if attempt == _REGISTER_ATTEMPTS - 1:
                raise
            time.sleep(1.0 + attempt)
    return False


def register_all(spark: SparkSession) -> list[str]:
    """Register every table of the warehouse (local or on S3) that the session does not know yet.

    Each table with a ledger gets its `<table>_ledger` view too (`tables.delta.ledger_view`), so
    analysts who query by name find the ledger beside the table.
    """
    if not is_warehouse_catalog(spark):
        return []
    root = local_path(warehouse_dir(spark))
    names = (
        candidate_tables(root)
        if root is not None
        else remote_candidate_tables(spark, warehouse_dir(spark))
    )
    added = []
    for name in names:
        known = spark.catalog.tableExists(name)
        if not known and register(spark, name):
            added.append(name)
            known = True
        view = ledger_view_name(name)
        if known and should_have_ledger_view(name) and not spark.catalog.tableExists(view):
            create_ledger_view(spark, name, table_location(warehouse_dir(spark), name))
    return added
