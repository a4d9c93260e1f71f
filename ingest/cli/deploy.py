"""Commands that put the lakehouse in front of its users: `serve` and `job-script`."""

from __future__ import annotations

import ipaddress
import shlex
import signal
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ingest.cli.common import ConfigOption, emit, err, handle_errors, remote_url
from ingest.config import load_config
from ingest.serve import (
    DEFAULT_CONNECT_PORT,
    DEFAULT_HOST,
    DEFAULT_PORT,
    ConnectServer,
    ServeOptions,
    delta_driver_jars,
    run_server,
    start_connect_server,
)
from ingest.submit import submit_command
from tables.engine.serve_token import serve_token, token_path
from tables.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def assert_port_free(host: str, port: int, option: str = "--port") -> None:
    """Raise ConfigError if something already listens on host:port (Spark would exit the JVM)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}): another server holds it; "
                f"pass {option}"
            ) from exc


def is_loopback(host: str) -> bool:
    """True if `host` is a loopback address or `localhost` (reachable from this machine only)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@handle_errors
def serve(
    context: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to listen on; loopback unless you mean otherwise.")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="JDBC (HiveServer2) port.")] = DEFAULT_PORT,
    connect: Annotated[
        bool, typer.Option("--connect/--no-connect", help="Also serve Spark Connect.")
    ] = True,
    connect_port: Annotated[int, typer.Option(help="Spark Connect port.")] = DEFAULT_CONNECT_PORT,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes", help="Let JDBC clients write, run DDL and SET (asks first)."
        ),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Answer yes to the --allow-writes question.")
    ] = False,
    expose: Annotated[
        bool,
        typer.Option(
            "--expose",
            help="Answer yes to listening beyond loopback (asked for each server otherwise; "
            "--yes does not answer it).",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Serve the lakehouse's tables over JDBC and Spark Connect until Ctrl-C or SIGTERM.

    JDBC clients (beeline, BI tools, any HiveServer2 driver) query tables by name while
    ingestion runs and see each table's newest committed version; that endpoint is read-only by
    default, with the same rule as `lakehouse sql`. Spark Connect clients, and `lakehouse
    --remote sc://HOST:PORT ...`, get Spark sessions over the same home. Tables created after
    the start are found within seconds.
    """
    if remote_url(context):
        raise ConfigError("serve starts the servers itself: run it without --remote")
    cfg = load_config(config, required=False)
    options = ServeOptions(host=host, port=port, allow_writes=allow_writes, limits=cfg.limits)
    if allow_writes and not yes:
        typer.confirm(
            f"Let every client of {options.url} write to the tables, change them and set "
            "session options?",
            abort=True,
            err=True,
        )
    if not is_loopback(host) and not expose:
        typer.confirm(
            f"Serve JDBC on {host}:{port}, beyond this machine? Clients log in with the token, "
            "which travels without TLS: whoever watches the network can take it and read every "
            "table (--expose answers this)",
            abort=True,
            err=True,
        )
    if connect and not is_loopback(host) and not expose:
        typer.confirm(
            f"Spark Connect asks for a token but has no TLS: whoever watches the network "
            f"between a client and {host}:{connect_port} can take the token, then run any code "
            "and write any table (PySpark clients send a token to another host over TLS only: "
            "put a TLS proxy in front). Serve it there (--no-connect serves JDBC only)?",
            abort=True,
            err=True,
        )
    assert_port_free(host, port)
    if connect:
        if not 0 < connect_port < 65536:
            raise ConfigError(f"--connect-port must be between 1 and 65535, got {connect_port}")
        assert_port_free(host, connect_port, "--connect-port (or --no-connect)")
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.engine.session import get_spark

    stop = threading.Event()

    def stop_on_signals() -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())

    stop_on_signals()
    # Both endpoints ask for this token (`tables.engine.serve_token`), made on the first start.
    token, made = serve_token(cfg.home)
    token_file = token_path(cfg.home)
    if made:
        err.print(
            f"made the token this server's clients log in with: {token_file} (readable by you "
            "only; delete it for a new one). JDBC: any user, the token as password (beeline "
            f"-n USER -w {token_file}); Spark Connect: `lakehouse --remote` reads it, other "
            "clients set SPARK_CONNECT_AUTHENTICATE_TOKEN and connect to sc://localhost:PORT",
            markup=False,
            soft_wrap=True,
        )
    connect_server = None
    try:
        if connect:
            connect_server = start_connect_server(cfg.home, cfg.catalog, host, connect_port, token)
        with err.status("starting Spark, the JDBC server and the Spark Connect server…"):
            spark = get_spark(
                cfg.home,
                app_name="lakehouse-serve",
                catalog=cfg.catalog,
                extra_conf=options.session_conf(token_file),
                driver_classpath=delta_driver_jars(),
            )
        # PySpark's SparkContext replaces the SIGINT handler with one that raises
        # KeyboardInterrupt: Ctrl-C then ended the command as interrupted instead of stopping.
        stop_on_signals()
        _serve_until_stopped(spark, options, stop, connect_server, (host, connect_port), token_file)
    finally:
        if connect_server is not None:
            connect_server.stop()
    emit(f"stopped serving {options.url}")


def _serve_until_stopped(
    spark: SparkSession,
    options: ServeOptions,
    stop: threading.Event,
    connect_server: ConnectServer | None,
    connect_address: tuple[str, int],
    token_file: Path,
) -> None:
    mode = "read-write" if options.allow_writes else "read-only"

    def ready(tables: list[str]) -> None:
        if connect_server is not None:
            connect_server.wait_ready(*connect_address)
        also = f" and {connect_server.url} (Spark Connect)" if connect_server else ""
        err.print(
            f"serving {len(tables)} table(s) at {options.url} ({mode}){also}; clients give the "
            f"token in {token_file} (JDBC: as the password, any user); Ctrl-C or SIGTERM stops",
            markup=False,
            soft_wrap=True,
        )

    try:
        run_server(spark, options, stop, on_ready=ready)
    finally:
        spark.stop()


@handle_errors
def job_script(
    master: Annotated[
        str, typer.Option(help="The cluster's master URL, e.g. spark://HOST:7077 or yarn.")
    ] = "spark://127.0.0.1:7077",
    arguments: Annotated[
        list[str] | None,
        typer.Argument(help="The lakehouse command the job runs, e.g. ingest events -c FILE."),
    ] = None,
) -> None:
    """Print a spark-submit command line that runs a lakehouse command as a scheduled job.

    The job script ships in the package; it builds the submitted driver's session with the
    config's home, catalog and warehouse, so each run finds the tables of the run before.
    """
    emit(shlex.join(submit_command(master, arguments or ["ingest", "-c", "lakehouse.toml"])))
