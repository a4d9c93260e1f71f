"""Commands that put the lakehouse in front of its users: `serve` (JDBC) and `job-script`."""

from __future__ import annotations

import signal
import socket
import threading
from typing import Annotated

import typer

from ingest.cli.common import ConfigOption, emit, err, handle_errors
from ingest.config import load_config
from ingest.job import submit_command
from ingest.serve import DEFAULT_HOST, DEFAULT_PORT, ServeOptions, delta_driver_jars, run_server
from tables.errors import ConfigError


def assert_port_free(host: str, port: int) -> None:
    """Raise ConfigError if something already listens on host:port (Spark would exit the JVM)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}): another server holds it; "
                "pass --port"
            ) from exc


@handle_errors
def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on; loopback unless you mean otherwise.")
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="JDBC (HiveServer2) port.")] = DEFAULT_PORT,
    allow_writes: Annotated[
        bool,
        typer.Option("--allow-writes", help="Let clients write, run DDL and SET (asks first)."),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Answer yes to the question.")] = False,
    config: ConfigOption = None,
) -> None:
    """Serve the lakehouse's tables over JDBC (HiveServer2 protocol) until Ctrl-C or SIGTERM.

    Clients (beeline, BI tools, any HiveServer2 driver) query tables by name while ingestion
    runs, and see each table's newest committed version. Read-only by default, with the same
    rule as `lakehouse sql`; tables created after the start are found within seconds.
    """
    options = ServeOptions(host=host, port=port, allow_writes=allow_writes)
    cfg = load_config(config, required=False)
    if allow_writes and not yes:
        typer.confirm(
            f"Let every client of {options.url} write to the tables, change them and set "
            "session options?",
            abort=True,
            err=True,
        )
    assert_port_free(host, port)
    from tables.session import get_spark

    stop = threading.Event()

    def stop_on_signals() -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())

    stop_on_signals()
    with err.status("starting Spark and the JDBC server…"):
        spark = get_spark(
            cfg.home,
            app_name="lakehouse-serve",
            catalog=cfg.catalog,
            extra_conf=options.session_conf(),
            driver_classpath=delta_driver_jars(),
        )
    # PySpark's SparkContext replaces the SIGINT handler with one that raises KeyboardInterrupt:
    # Ctrl-C then ended the command as interrupted instead of stopping the server.
    stop_on_signals()
    mode = "read-write" if allow_writes else "read-only"

    def ready(tables: list[str]) -> None:
        err.print(
            f"serving {len(tables)} table(s) at {options.url} ({mode}); Ctrl-C or SIGTERM stops",
            markup=False,
            soft_wrap=True,
        )

    try:
        run_server(spark, options, stop, on_ready=ready)
    finally:
        spark.stop()
    emit(f"stopped serving {options.url}")


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
    import shlex

    emit(shlex.join(submit_command(master, arguments or ["ingest", "-c", "lakehouse.toml"])))
