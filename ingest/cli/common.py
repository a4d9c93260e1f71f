"""What every `lakehouse` command shares: the error contract, common options, output, Spark."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer
from rich.console import Console

from ingest.cli.output import OutputFormat
from ingest.config import LakehouseConfig
from tables.errors import LakehouseError, error_summary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

P = ParamSpec("P")
R = TypeVar("R")

EXIT_TERMINAL = 1
EXIT_TRANSIENT = 75
EXIT_INTERRUPTED = 130
#: A failure that is the driver JVM's end (a task's VirtualMachineError ends it, as does an OOM
#: kill): transient, the next run goes on exactly once.
JVM_LOST = (
    "the Spark driver JVM was lost (its log in <home>/logs/spark-driver.log says why); "
    "run the command again"
)

#: Progress and batch lines: never wrapped (one line per batch whatever the terminal's width,
#: also when stderr is a file or a pipe, where Rich would wrap at 80 columns), no markup.
err = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Config file (default: ./lakehouse.toml).", show_default=False
    ),
]
FormatOption = Annotated[
    OutputFormat, typer.Option("--format", "-f", help="Output format: table, json or csv.")
]
WideOption = Annotated[
    bool,
    typer.Option("--wide", help="Table format: every column, by its full name, however wide."),
]


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn project errors into one line on stderr and an exit code that says their kind."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt as exc:
            err.print("error: interrupted before the command finished", markup=False)
            raise typer.Exit(EXIT_INTERRUPTED) from exc
        except LakehouseError as exc:
            if os.environ.get("LAKEHOUSE_DEBUG"):
                raise
            err.print(f"error: {exc}", markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_TRANSIENT if exc.kind == "transient" else EXIT_TERMINAL) from exc
        except Exception as exc:
            if os.environ.get("LAKEHOUSE_DEBUG"):
                raise
            # Deferred: PySpark loads only when a command has failed.
            from tables.engine.jvm import is_jvm_lost

            if is_jvm_lost(exc):
                err.print(f"error: {JVM_LOST}", markup=False, soft_wrap=True)
                raise typer.Exit(EXIT_TRANSIENT) from exc
            summary = error_summary(exc)
            err.print(
                f"error: {type(exc).__name__}: {summary} (LAKEHOUSE_DEBUG=1 for details)",
                markup=False,
                soft_wrap=True,
            )
            raise typer.Exit(EXIT_TERMINAL) from exc

    return wrapper


@dataclass(frozen=True)
class Invocation:
    """What the `lakehouse` callback learns for the command it runs: the Spark Connect server
    (`--remote`, `LAKEHOUSE_REMOTE`), and whether the process is the console script's own
    (`owns_process`: set by `main()`, not when a test runner or an application invokes the app).
    Kept in the command's click context, not in a module."""

    remote: str | None = None
    owns_process: bool = False


def remote_url(context: typer.Context) -> str | None:
    """The `--remote` server of the command `context` runs, if any."""
    found = context.find_root().obj
    return found.remote if isinstance(found, Invocation) else None


def owns_process(context: typer.Context) -> bool:
    """Whether the command `context` runs is the only work of its process (the console script),
    so it may change process-wide state such as the cycle collector's frozen set."""
    found = context.find_root().obj
    return isinstance(found, Invocation) and found.owns_process


def spark_for(config: LakehouseConfig, context: typer.Context) -> SparkSession:
    """The Spark session for the config's lakehouse home, with a spinner.

    Started here (or found, under spark-submit and on Databricks), or a Spark Connect session on
    the server `--remote` names.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.engine.session import connect_session, get_spark

    url = remote_url(context)
    if url:
        with err.status(f"connecting to {url}…"):
            return connect_session(url, config.home)
    kafka = any(p.source.needs_kafka for p in config.pipelines.values())
    with err.status("starting Spark…"):
        return get_spark(config.home, kafka=kafka, catalog=config.catalog)


def emit(text: str) -> None:
    """Print a command's result on stdout."""
    typer.echo(text)


def reflowed(doc: str) -> str:
    """A docstring as help text: each paragraph's lines joined into one line.

    Typer's help keeps a docstring's line breaks and then wraps each line to the terminal, so at
    80 columns a 100-column source line printed as two, the second a word or two long.
    """
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def with_reflowed_help(commands: typer.Typer) -> None:
    """Give each registered command of `commands` its docstring's `reflowed` text as its help."""
    for info in commands.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = reflowed(info.callback.__doc__)
