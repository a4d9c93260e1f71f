"""Operator commands: replay, vacuum, optimize, apps, reset-app, verify, backfill-rescued.

Each validates its names before Spark starts, asks before anything that deletes rows or files
beyond the safe defaults (`--yes` answers for scripts), and reports what it did.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ingest.cli.common import (
    EXIT_TERMINAL,
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
from tables.errors import ConfigError
from tables.identifiers import validate_app_id, validate_column_name, validate_table_name

if TYPE_CHECKING:
    from ingest.admin.replay import ReplayMode, ReplayResult
    from tables.delta.maintenance import VacuumReport

TableArgument = Annotated[str, typer.Argument(help="Table name.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Answer yes to the confirmation.")]


@handle_errors
def replay(
    context: typer.Context,
    table: TableArgument,
    app_id: Annotated[str, typer.Option("--app-id", help="App id whose batches to replay.")],
    from_batch: Annotated[int, typer.Option("--from-batch", min=0, help="First batch id.")],
    to_batch: Annotated[
        int | None, typer.Option("--to-batch", min=0, help="Last batch id (default: the last).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only; write nothing.")] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Rewrite each batch's rows from its source.")
    ] = False,
    yes: YesOption = False,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Re-apply committed batches from the source files their ledger entries name.

    Rows missing from a batch (deleted by mistake, say) come back; rows still present are not
    duplicated. With --replace, each batch's rows are rewritten from its source in one atomic
    commit: rows the source no longer has are removed. On an upsert table each batch's versions
    are applied again, newest wins (--replace does not apply). If any batch's files are gone,
    nothing is written and the error names the batches and files.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.admin.replay import (
        ReplayOptions,
        assert_sources_present,
        plan_replay,
        replay_batch,
    )
    from quality.expectations import ExpectationGate
    from tables.delta.writer import TableWriter

    validate_table_name(table)
    validate_app_id(app_id)
    cfg = load_config(config)
    spec = cfg.table(table)
    source = next(
        (p.source for p in cfg.pipelines.values() if p.writes(table) and p.app_id == app_id),
        None,
    )
    spark = spark_for(cfg, context)
    plans = plan_replay(spark, spec, app_id, from_batch, to_batch, source)
    assert_sources_present(spark, plans)
    if replace and not dry_run and not yes:
        typer.confirm(
            f"Rewrite the rows of {len(plans)} batch(es) of {app_id} in {table} from their "
            "source files (rows the sources no longer have are removed)?",
            abort=True,
            err=True,
        )
    gate = ExpectationGate(spec, cfg.home / "gx") if spec.expectations else None
    results: list[ReplayResult] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("replaying batches", total=len(plans))
        mode: ReplayMode = "replace" if replace else "replay"
        options = ReplayOptions(mode=mode, dry_run=dry_run, gate=gate)
        writer = TableWriter(spark, spec, app_id)
        for plan in plans:
            results.append(replay_batch(writer, plan, options))
            progress.advance(task)
    rows = [
        {
            "batch_id": r.batch_id,
            "rows_in_source": r.rows_source,
            "rows_restored": r.rows_restored,
            "rows_already_present": r.rows_already_present,
            "rows_deleted": r.rows_deleted,
            "rows_rejected": r.rows_rejected,
            "version": r.version,
        }
        for r in results
    ]
    title = f"{'dry run: ' if dry_run else ''}{'replace' if replace else 'replay'} of {app_id}"
    emit(render(rows, format, wide=wide, title=title))


@handle_errors
def vacuum(
    context: typer.Context,
    table: TableArgument,
    retain_hours: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Keep files removed within this many hours (default: the table's retention, "
            "or the replay window if longer).",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the files only.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Allow a retention below the table's.")
    ] = False,
    yes: YesOption = False,
    config: ConfigOption = None,
) -> None:
    """Delete files the table's log no longer references, older than the retention.

    Refuses a retention shorter than the replay window, and one below the table's deleted-file
    retention (7 days by default) unless --force is given and confirmed. Lists the files and
    bytes it removes; --dry-run lists them and removes nothing. On an upsert table it also
    expires the tombstones older than its tombstone_retention (--dry-run: counts them).
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.commit.tombstones import VACUUM_APP_ID, expire_tombstones
    from tables.delta.maintenance import vacuum as run_vacuum
    from tables.delta.writer import TableWriter

    validate_table_name(table)
    cfg = load_config(config, required=False)
    window = cfg.tables[table].replay_window if table in cfg.tables else cfg.replay_window
    spark = spark_for(cfg, context)

    def confirm(report: VacuumReport) -> None:
        if force and not dry_run and not yes and report.files:
            typer.confirm(
                f"Delete {len(report.files)} path(s), {report.size_bytes} bytes, from {table} "
                f"with a forced retention of {report.retain_hours:g} h?",
                abort=True,
                err=True,
            )

    report = run_vacuum(
        spark,
        table,
        retain_hours=retain_hours,
        replay_window=window,
        dry_run=dry_run,
        force=force,
        before_delete=confirm,
    )
    verb = "would remove" if report.dry_run else "removed"
    for name in report.files if report.dry_run else ():
        emit(name)
    emit(
        f"{table}: {verb} {len(report.files)} path(s), {report.size_bytes} bytes "
        f"(retention {report.retain_hours:g} h)"
    )
    spec = {name.lower(): s for name, s in cfg.tables.items()}.get(table.lower())
    if spec is not None and spec.merge == "upsert":
        writer = TableWriter(spark, spec, VACUUM_APP_ID)
        expiry = expire_tombstones(writer, -1, datetime.now(UTC), dry_run=dry_run)
        emit(f"{expiry.table}: {'dry run: ' if dry_run else ''}{expiry.describe()}")


@handle_errors
def backfill_rescued(
    context: typer.Context,
    table: TableArgument,
    column: Annotated[str, typer.Argument(help="The column whose rescued values to land.")],
    yes: YesOption = False,
    config: ConfigOption = None,
) -> None:
    """Land values rescued before their column existed into it, in one commit the ledger records.

    For rows whose COLUMN is NULL and whose _lh_rescued holds a field of that name: the value is
    set in the column and removed from _lh_rescued. A value that does not convert stays rescued.
    Running it again finds nothing more to do.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.admin.backfill import backfill_rescued as run_backfill
    from tables.engine.clones import SessionClones

    validate_table_name(table)
    validate_column_name(column)
    loaded = load_config(config, required=False)
    specs = {name.lower(): spec for name, spec in loaded.tables.items()}
    spec = specs.get(table.lower())
    if spec is None:
        raise ConfigError(f"table {table} is not declared in the config: its record key is needed")
    if not yes and not typer.confirm(f"Set {column} of {table} from its rescued values?"):
        raise typer.Exit(1)
    spark = spark_for(loaded, context)
    with err.status(f"backfilling {table}.{column}…"):
        report = run_backfill(spark, spec, column, SessionClones())
    emit(report.describe())


@handle_errors
def optimize(
    context: typer.Context,
    table: TableArgument,
    zorder_by: Annotated[
        list[str] | None,
        typer.Option("--zorder-by", help="Z-order by this column (repeatable)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Compact the small files micro-batches leave behind; report file counts before and after.

    Rows, markers and the ledger are untouched: OPTIMIZE rewrites files, not data.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.delta.maintenance import optimize as run_optimize

    validate_table_name(table)
    columns = [validate_column_name(c) for c in zorder_by or []]
    spark = spark_for(load_config(config, required=False), context)
    with err.status(f"optimizing {table}…"):
        report = run_optimize(spark, table, columns)
    emit(
        f"{table}: {report.files_before} files before, {report.files_after} after "
        f"({report.metrics.get('numFilesRemoved', 0)} removed, "
        f"{report.metrics.get('numFilesAdded', 0)} added)"
    )


@handle_errors
def apps(
    context: typer.Context,
    table: TableArgument,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """List the app ids that commit into a table, with the last batch each has committed."""
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.admin.apps import list_apps

    validate_table_name(table)
    spark = spark_for(load_config(config, required=False), context)
    rows = [a.as_row() for a in list_apps(spark, table)]
    emit(
        render(rows, format, wide=wide, title=f"apps of {table}")
        if rows
        else "no app has committed"
    )


@handle_errors
def reset_app(
    context: typer.Context,
    table: TableArgument,
    app_id: Annotated[str, typer.Option("--app-id", help="App id whose marker to move.")],
    to_batch: Annotated[
        int, typer.Option("--to-batch", help="New last committed batch (-1: none).")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Allow moving the marker forward (skips batches).")
    ] = False,
    yes: YesOption = False,
    config: ConfigOption = None,
) -> None:
    """Move an app's committed-batch markers, recorded in the log as `reset` commits.

    For example after a lost checkpoint: `--to-batch -1` lets a fresh checkpoint start at batch
    0 again. All three markers the app owns move: the target's, its quarantine table's and its
    audit record's, so re-run batches land their rejected rows and findings too. A reset cut
    short is reported and finished first. Moving back re-admits batches (their rows may land
    again if read again); moving forward skips batches and needs --force.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.admin.apps import (
        finish_reset,
        pending_reset,
        validate_reset,
        validate_reset_target,
    )
    from ingest.admin.apps import reset_app as run_reset
    from tables.delta.markers import committed_batch

    validate_table_name(table)
    validate_app_id(app_id)
    validate_reset_target(to_batch)
    spark = spark_for(load_config(config, required=False), context)
    pending = pending_reset(spark, table, app_id)
    if pending is not None:
        err.print(f"{pending.describe()}; finishing it")
        finish_reset(spark, pending)
        emit(f"{table}: finished the reset of {app_id} to batch {pending.to_batch}")
    current = committed_batch(spark, table, app_id)
    direction = validate_reset(current, to_batch, force=force)
    if direction == "same":
        emit(f"{table}: marker of {app_id} is already {to_batch}; nothing to do")
        return
    if not yes:
        typer.confirm(
            f"Move the markers of {app_id} in {table} (target, quarantine, audit record) from "
            f"{current} to {to_batch} ({direction})?",
            abort=True,
            err=True,
        )
    version = run_reset(spark, table, app_id, to_batch)
    emit(
        f"{table}: marker of {app_id} moved from {current} to {to_batch} (version {version}); "
        f"its quarantine and audit markers are at {to_batch} too"
    )


@handle_errors
def verify(
    context: typer.Context,
    table: Annotated[str, typer.Argument(help="Table declared in the config.")],
    app_id: Annotated[
        str | None, typer.Option("--app-id", help="Check this app id only (default: all).")
    ] = None,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Prove exactly-once from the table's log and tables alone; exit 1 on any finding.

    Checks that each app id's ledger has no gap up to its marker, that each batch's counts add
    up and the table and quarantine hold exactly its rows, that no commit changed data outside
    the ledger, that no record key appears twice, and that the quarantine and audit markers
    agree with the target's. Reads only: nothing is written.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.admin.verify import verify_table

    validate_table_name(table)
    if app_id is not None:
        validate_app_id(app_id)
    cfg = load_config(config)
    spec = cfg.table(table)
    spark = spark_for(cfg, context)
    with err.status(f"verifying {table} from its log and tables…"):
        verdict = verify_table(spark, spec, app_id)
    for note in verdict.notes:
        err.print(f"note: {note}", markup=False, soft_wrap=True)
    if verdict.findings:
        emit(
            render(
                [f.as_row() for f in verdict.findings],
                format,
                wide=wide,
                title=f"findings in {table}",
            )
        )
    summary = (
        f"{table}: {verdict.apps} app id(s), {verdict.batches} batch(es) checked, "
        f"{len(verdict.findings)} finding(s)"
    )
    if verdict.passed:
        err.print(f"{summary}: exactly once holds", markup=False, soft_wrap=True)
        return
    err.print(f"{summary}: FAILED", markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_TERMINAL)
