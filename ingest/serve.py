"""`lakehouse serve`: a JDBC endpoint and a Spark Connect endpoint over the lakehouse's tables.

Analysts and BI tools connect with any HiveServer2 client (beeline, a JDBC driver, PyHive) and
query the tables by name while ingestion runs in other processes. It is Spark's own Thrift
server, started on a session this project builds: Delta on the driver's class path, the same
home and catalog as every `lakehouse` command, and the read-only guard of `lakehouse sql`
(`tables.engine.readonly`) unless writes are allowed. Tables that other processes create later are
registered as they appear (`tables.delta.warehouse`), and every query reads the newest committed
version of each table it names.

Programs, and `lakehouse --remote`, use Spark Connect: Spark's own Connect server, in a JVM of
its own (a child process), configured as the embedded session is (`tables.engine.session.
embedded_settings`), with this interpreter as its Python workers so that a pipeline's batches
run this package's code. It is not read-only: a Connect client is a Spark session like any
other, and `lakehouse sql --remote` marks its own session read-only as the embedded one does.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark

from tables.delta.warehouse import register_all
from tables.engine.catalogs import CatalogSpec
from tables.engine.confs import (
    CUSTOM_AUTHENTICATION_CLASS,
    SERVE_AUTH_FILE_CONF,
    SERVER_READ_ONLY_CONF,
    TOKEN_AUTHENTICATOR,
    VARIABLE_SUBSTITUTION_CONF,
)
from tables.engine.connectors import cached_delta_classpath, cached_delta_jars
from tables.engine.jvm.servers import start_jdbc_server, trust_this_thread
from tables.engine.limits import QueryLimits
from tables.engine.secrets import (
    copy_redacted,
    split_secrets,
    submit_options,
    write_secrets_file,
)
from tables.engine.serve_token import TOKEN_ENV
from tables.engine.session import embedded_settings
from tables.errors import ConfigError, SessionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10000
DEFAULT_CONNECT_PORT = 15002
REFRESH_SECONDS = 5.0
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: How long a Connect session lives unused (`ingest.remote_lease` says why it matters).
CONNECT_SESSION_TIMEOUT = "15m"
CONNECT_START_SECONDS = 180.0


@dataclass(frozen=True)
class ServeOptions:
    """Where the endpoint listens, whether it may write, how often it looks for new tables."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_writes: bool = False
    refresh_seconds: float = REFRESH_SECONDS
    limits: QueryLimits = field(default_factory=QueryLimits)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"--port must be between 1 and 65535, got {self.port}")
        if self.refresh_seconds <= 0:
            raise ConfigError("the table refresh interval must be positive")

    @property
    def url(self) -> str:
        """The JDBC URL clients connect to."""
        return f"jdbc:hive2://{self.host}:{self.port}/default"

    def session_conf(self, token_file: Path) -> dict[str, str]:
        """The Spark settings of the server's session: listener, one session per client, guard,
        and the login: any user, the token in `token_file` as password."""
        return {
            "hive.server2.authentication": "CUSTOM",
            CUSTOM_AUTHENTICATION_CLASS: TOKEN_AUTHENTICATOR,
            SERVE_AUTH_FILE_CONF: str(token_file),
            "hive.server2.thrift.bind.host": self.host,
            "hive.server2.thrift.port": str(self.port),
            "spark.sql.hive.thriftServer.singleSession": "false",
            SERVER_READ_ONLY_CONF: "false" if self.allow_writes else "true",
            VARIABLE_SUBSTITUTION_CONF: "true" if self.allow_writes else "false",
            **self.limits.jdbc_conf(),
        }


def delta_driver_jars() -> list[Path]:
    """Delta's JARs for the server's class path, resolved once by a short session if needed."""
    jars = cached_delta_jars()
    if jars is None:
        subprocess.run(
            [sys.executable, "-m", "tables.engine.session", "--resolve"],
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


@dataclass
class ConnectServer:
    """Spark's Connect server in a child process, configured for the lakehouse home."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    token: str
    #: The server's secret settings, read by spark-submit at its start; removed once it listens.
    secrets: Path | None = None
    #: The thread copying the server's output into `log`, its secrets redacted.
    copier: threading.Thread | None = None

    def _forget_secrets(self) -> None:
        if self.secrets is not None:
            self.secrets.unlink(missing_ok=True)

    def wait_ready(self, host: str, port: int, timeout: float = CONNECT_START_SECONDS) -> None:
        """Return once the server accepts connections; SessionError if it ended or timed out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SessionError(
                    f"the Spark Connect server ended with exit code {self.process.returncode} "
                    f"before it listened on {host}:{port}; see {self.log}"
                )
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
                self._forget_secrets()
                return
            time.sleep(0.5)
        self.stop()
        raise SessionError(f"the Spark Connect server did not listen within {timeout:.0f} s")

    def stop(self, timeout: float = 30.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after `timeout`); its exit code."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._forget_secrets()
        if self.copier is not None:
            self.copier.join(timeout)
        return self.process.returncode


def connect_server_command(
    home: Path, catalog: CatalogSpec, host: str, port: int
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The spark-submit command line, environment and secret settings of a Connect server.

    The secret settings (`tables.engine.secrets`) are not on the command line: the caller hands
    them to spark-submit in a file.
    """

    driver_jars = delta_driver_jars()  # resolves and remembers Delta's JARs if none are yet
    delta = [str(j) for j in cached_delta_classpath() or ()]
    settings = embedded_settings(
        home,
        catalog,
        kafka=True,
        driver_classpath=driver_jars,
        extra_conf={
            "spark.connect.grpc.binding.address": host,
            "spark.connect.grpc.binding.port": str(port),
            "spark.app.name": "lakehouse-connect",
            # A session no client has used for this long is closed with its streams (Spark's
            # default is an hour): the end of a stream whose client died while it had no data.
            "spark.connect.session.manager.defaultSessionTimeout": CONNECT_SESSION_TIMEOUT,
        },
    )
    settings["spark.jars"] = ",".join([*delta, *filter(None, settings["spark.jars"].split(","))])
    public, secret = split_secrets(settings)
    spark_home = Path(pyspark.__file__).parent
    command = [str(spark_home / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS]
    for key, value in public.items():
        command += ["--conf", f"{key}={value}"]
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": host if host != "0.0.0.0" else "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    return command, env, secret


def start_connect_server(
    home: Path, catalog: CatalogSpec, host: str, port: int, token: str
) -> ConnectServer:
    """Start Spark's Connect server for `home` in a child process (not yet ready).

    Every call must carry `token` (`tables.engine.serve_token`), given to the server in its
    environment. The server ends with the thread that starts it, even
    when this process is killed outright (SIGKILL, the OOM killer) and cannot stop it: an orphan
    would go on listening and hold the port from the next `serve`.
    """
    command, env, secret = connect_server_command(home, catalog, host, port)
    env[TOKEN_ENV] = token
    log = home / "logs" / "connect-server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    properties = write_secrets_file(secret)
    if properties is not None:
        command[1:1] = submit_options(properties)
    try:
        process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=ending_with_this_thread(),
        )
    except BaseException:
        if properties is not None:  # no server will read it
            properties.unlink(missing_ok=True)
        raise
    assert process.stdout is not None
    # Its Python workers print the server's URL with the token: the log gets it redacted.
    copier = copy_redacted(process.stdout, log, [token])
    return ConnectServer(process, f"sc://{host}:{port}", log, token, properties, copier)


def ending_with_this_thread() -> Callable[[], None] | None:
    """A pre-exec hook that has Linux send the child SIGTERM when the forking thread ends.

    The parent-death signal survives the exec of spark-submit and of the JVM it starts. A
    parent that died before the hook ran is caught by its pid; off Linux there is no hook.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return hook


_PR_SET_PDEATHSIG = 1
