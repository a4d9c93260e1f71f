"""`lakehouse serve`: a JDBC endpoint (HiveServer2 protocol) over the lakehouse's tables.

Analysts and BI tools connect with any HiveServer2 client (beeline, a JDBC driver, PyHive) and
query the tables by name while ingestion runs in other processes. It is Spark's own Thrift
server, started on a session this project builds: Delta on the driver's class path, the same
home and catalog as every `lakehouse` command, and the read-only guard of `lakehouse sql`
(`tables.readonly`) unless writes are allowed. Tables that other processes create later are
registered as they appear (`tables.warehouse`), and every query reads the newest committed
version of each table it names.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tables.connectors import cached_delta_jars
from tables.errors import ConfigError, SessionError
from tables.readonly import SERVER_READ_ONLY_CONF, trust_this_thread
from tables.session import start_jdbc_server
from tables.warehouse import register_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10000
REFRESH_SECONDS = 5.0


@dataclass(frozen=True)
class ServeOptions:
    """Where the endpoint listens, whether it may write, how often it looks for new tables."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_writes: bool = False
    refresh_seconds: float = REFRESH_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"--port must be between 1 and 65535, got {self.port}")
        if self.refresh_seconds <= 0:
            raise ConfigError("the table refresh interval must be positive")

    @property
    def url(self) -> str:
        """The JDBC URL clients connect to."""
        return f"jdbc:hive2://{self.host}:{self.port}/default"

    def session_conf(self) -> dict[str, str]:
        """The Spark settings of the server's session: listener, one session per client, guard."""
        return {
            "hive.server2.thrift.bind.host": self.host,
            "hive.server2.thrift.port": str(self.port),
            "spark.sql.hive.thriftServer.singleSession": "false",
            SERVER_READ_ONLY_CONF: "false" if self.allow_writes else "true",
        }


def delta_driver_jars() -> list[Path]:
    """Delta's JARs for the server's class path, resolved once by a short session if needed."""
    jars = cached_delta_jars()
    if jars is None:
        subprocess.run(
            [sys.executable, "-m", "tables.session", "--resolve"],
            capture_output=True,
            check=False,
        )
        jars = cached_delta_jars()
    if jars is None:
        raise SessionError(
            "Delta's JARs could not be resolved for the JDBC server: run `make setup` (or any "
            "lakehouse command) where Maven Central is reachable, then try again"
        )
    return jars


def run_server(
    spark: SparkSession,
    options: ServeOptions,
    stop: threading.Event,
    on_ready: Callable[[list[str]], None] | None = None,
) -> None:
    """Serve until `stop` is set, registering tables that appear in the warehouse meanwhile."""
    trust_this_thread(spark)
    tables = register_all(spark)
    server = start_jdbc_server(spark)
    try:
        if on_ready is not None:
            on_ready(tables)
        while not stop.wait(options.refresh_seconds):
            register_all(spark)
    finally:
        server.stop()
