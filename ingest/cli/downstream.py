"""Commands for readers downstream of a table: its change data feed, read or turned on."""

from __future__ import annotations

from typing import Annotated

import typer

from ingest.cli.common import (
    ConfigOption,
    FormatOption,
    WideOption,
    emit,
    err,
    handle_errors,
    spark_for,
)
from ingest.cli.output import OutputFormat, render
from ingest.config import load_config
from tables.identifiers import validate_table_name

TableArgument = Annotated[str, typer.Argument(help="Table name.")]


@handle_errors
def changes(
    context: typer.Context,
    table: TableArgument,
    since: Annotated[int, typer.Option("--since", min=0, help="First table version to read.")],
    until: Annotated[
        int | None,
        typer.Option("--until", min=0, help="Last table version to read (default: the latest)."),
    ] = None,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Print a table's change data feed between two versions: inserts, deletes and updates.

    Each row is a changed row of the table with `_commit_version`, `_change_type` (insert,
    delete, update_preimage, update_postimage) and `_commit_timestamp`. Without --until it reads
    up to the latest version and names it on stderr: a consumer that keeps that version and
    asks next with --since one above it reads every change exactly once. A table whose feed is
    off is an error that names the fix (`lakehouse enable-changes`).
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.delta.changes import is_missing_changes, missing_changes_error, read_changes
    from tables.errors import QueryError, error_summary

    validate_table_name(table)
    spark = spark_for(load_config(config, required=False), context)
    frame, versions = read_changes(spark, table, since, until)
    try:
        rows = [r.asDict(recursive=True) for r in frame.collect()]
    except Exception as exc:
        if is_missing_changes(exc):
            raise missing_changes_error(spark, table, exc) from None
        raise QueryError(f"reading the changes of {table} failed: {error_summary(exc)}") from exc
    if versions.is_empty:
        err.print(f"changes of {table}: no version after {versions.until}; next --since {since}")
    else:
        err.print(
            f"changes of {table}: versions {versions.since} to {versions.until}, "
            f"{len(rows)} row(s); next --since {versions.until + 1}"
        )
    emit(render(rows, format, wide=wide, columns=frame.columns, title=f"changes of {table}"))


@handle_errors
def enable_changes(
    context: typer.Context, table: TableArgument, config: ConfigOption = None
) -> None:
    """Turn on the change data feed of a table created without it (a metadata-only commit).

    Tables this project creates have it from the start (`delta.enableChangeDataFeed`). For an
    older table, changes are recorded from the version this commit makes on; earlier versions
    have none. A batch committing at the same moment retries, as after any concurrent commit.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.delta.changes import enable_change_feed

    validate_table_name(table)
    spark = spark_for(load_config(config, required=False), context)
    start, turned_on = enable_change_feed(spark, table)
    state = "on from version" if turned_on else "already on, since version"
    emit(
        f"{table}: change data feed {state} {start}; read it with `lakehouse changes {table} "
        f"--since {start}`"
    )
