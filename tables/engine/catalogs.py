"""Which catalog maps table names to locations: the warehouse directory, or a Hive metastore.

`warehouse` (the default) needs nothing: every process derives the catalog from the directories
under `<home>/warehouse` (`tables.delta.warehouse`). `hive` is the production choice when tables
must be found by engines other than this project's sessions (BI through a Thrift server of its own,
other Spark jobs): an external Hive metastore database, PostgreSQL here, whose JDBC driver is
fetched from Maven Central into the JAR cache. The password never sits in the config file: it is
read from the environment variable the config names. Either catalog may keep its tables on S3
(`warehouse = "s3a://..."` with `storage`, `tables.engine.object_store`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal, get_args

from tables.engine.connectors import fetch_postgres_jdbc_jars
from tables.engine.object_store import (
    StorageSpec,
    is_object_store,
    object_store_jars,
    validate_object_store_location,
)
from tables.errors import ConfigError
from tables.identifiers import shorten

CatalogKind = Literal["warehouse", "hive"]

#: The PostgreSQL JDBC driver the metastore connects with (Maven Central).
_DRIVERS: Mapping[str, str] = MappingProxyType(
    {
        "postgresql": "org.postgresql.Driver",
    }
)


@dataclass(frozen=True)
class CatalogSpec:
    """The catalog of a lakehouse home, as `[lakehouse.catalog]` declares it."""

    kind: CatalogKind = "warehouse"
    url: str | None = None
    user: str | None = None
    password_env: str | None = None
    #: Where tables are created and found (None: `<home>/warehouse`); `s3a://...` needs `storage`.
    warehouse: str | None = None
    #: `[lakehouse.storage]`: how `s3a://` locations are reached and committed to.
    storage: StorageSpec | None = None

    def __post_init__(self) -> None:
        if self.warehouse is not None:
            validate_object_store_location(self.warehouse)
            if is_object_store(self.warehouse) and self.storage is None:
                raise ConfigError(
                    f"warehouse {shorten(self.warehouse)} is on S3: declare [lakehouse.storage] "
                    "(its endpoint and region) so commits go through the conditional log store"
                )
        if self.kind not in get_args(CatalogKind):
            raise ConfigError(
                f"kind must be one of {get_args(CatalogKind)}, got {shorten(self.kind)}"
            )
        if self.kind == "warehouse":
            if self.url or self.user or self.password_env:
                raise ConfigError("url, user and password_env apply to kind = 'hive' only")
            return
        if not self.url:
            raise ConfigError("kind = 'hive' needs url (e.g. jdbc:postgresql://host:5432/db)")
        if self.database_kind not in _DRIVERS:
            raise ConfigError(
                f"url {shorten(self.url)}: the metastore database must be one of "
                f"{sorted(_DRIVERS)} "
                "(jdbc:postgresql://HOST:PORT/DATABASE)"
            )

    @property
    def database_kind(self) -> str:
        """The JDBC subprotocol of the metastore URL (`postgresql`)."""
        parts = (self.url or "").split(":", 2)
        return parts[1] if len(parts) > 2 and parts[0] == "jdbc" else ""

    def session_conf(self, home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The Spark settings that select this catalog for a session rooted at `home`."""
        conf = {"spark.sql.warehouse.dir": self.warehouse or str(home / "warehouse")}
        if self.storage is not None:
            conf.update(self.storage.session_conf())
        if self.kind == "warehouse":
            conf["spark.sql.catalogImplementation"] = "in-memory"
            return conf
        env = os.environ if environ is None else environ
        conf.update(
            {
                "spark.sql.catalogImplementation": "hive",
                "spark.hadoop.javax.jdo.option.ConnectionURL": str(self.url),
                "spark.hadoop.javax.jdo.option.ConnectionDriverName": _DRIVERS[self.database_kind],
                # The first session creates the whole schema before its Hive client starts
                # (`tables.engine.metastore`); the metastore does not insist on a version stamp that
                # only Hive's schematool writes.
                "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
                "spark.hadoop.hive.metastore.schema.verification": "false",
            }
        )
        if self.user:
            conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] = self.user
        if self.password_env:
            password = env.get(self.password_env)
            if password is None:
                raise ConfigError(f"the metastore password variable {self.password_env} is not set")
            conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] = password
        return conf

    def jars(self) -> list[Path]:
        """The JARs this catalog needs on the driver's class path (cached): the metastore's
        JDBC driver, S3A and the conditional log store."""
        found = object_store_jars() if self.storage is not None else []
        if self.kind == "hive":
            found.extend(fetch_postgres_jdbc_jars())
        return found
