"""The `lakehouse` command line: ingest pipelines and inspect tables declared in lakehouse.toml.

Every error is one line on stderr and a non-zero exit code: 1 for terminal errors (fix something
first), 75 for transient ones (retrying may succeed), 2 for usage errors, 130 and 143 for an
ingest stopped between batches by SIGINT (Ctrl-C) or SIGTERM. Set LAKEHOUSE_DEBUG=1 to get the
full traceback instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ingest.cli import admin as cli_admin
from ingest.cli import deploy as cli_deploy
from ingest.cli import downstream as cli_downstream
from ingest.cli import ingest_command as cli_ingest
from ingest.cli.common import (
    EXIT_TERMINAL,
    ConfigOption,
    FormatOption,
    Invocation,
    WideOption,
    emit,
    err,
    handle_errors,
    spark_for,
    with_reflowed_help,
)
from ingest.cli.output import OutputFormat, render
from ingest.cli.views import history_view
from ingest.config import load_config
from ingest.stopping import quiet_py4j
from tables.errors import ConfigError, QueryError, error_summary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.config.model import LakehouseConfig

app = typer.Typer(
    help="Land streams in Delta Lake tables exactly once, and operate those tables.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main(
    context: typer.Context,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            envvar="LAKEHOUSE_REMOTE",
            help="Run the command through a Spark Connect server (sc://HOST:PORT), such as the "
            "one `lakehouse serve` starts.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Land streams in Delta Lake tables exactly once, and operate those tables."""
    started = context.obj  # `main()`'s, when the console script runs
    context.obj = Invocation(
        remote=remote, owns_process=isinstance(started, Invocation) and started.owns_process
    )
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from pyspark.logger import PySparkLogger

    # PySpark logs every failed query's context at ERROR on stderr; the CLI reports the error
    # itself, in one line.
    PySparkLogger.getLogger("SQLQueryContextLogger").disabled = True
    quiet_py4j()


app.command()(cli_ingest.ingest)


@app.command()
@handle_errors
def status(
    context: typer.Context,
    table: Annotated[str, typer.Argument(help="Table name.")],
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Show a table's state: version, size, files, rows, each app's last committed batch, and
    whether each pipeline of the config that writes it is running now, and whose run it is."""
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.checkpoint import run_state
    from tables.delta.history import table_version
    from tables.delta.markers import committed_batches
    from tables.delta.table import table_detail, table_exists
    from tables.identifiers import validate_table_name
    from tables.spec import quarantine_table_name

    validate_table_name(table)
    loaded = load_config(config, required=False)
    spark = spark_for(loaded, context)
    detail = table_detail(spark, table)
    quarantine = quarantine_table_name(table)
    row: dict[str, Any] = {
        "table": table,
        "version": table_version(spark, table),
        "rows": spark.table(table).count(),
        "files": detail.num_files,
        "size_bytes": detail.size_bytes,
        "quarantined_rows": (
            spark.table(quarantine).count() if table_exists(spark, quarantine) else 0
        ),
        "apps": {
            app_id: batch for app_id, batch in sorted(committed_batches(spark, table).items())
        },
        "streams": {
            p.name: run_state(p.checkpoint).describe()
            for p in loaded.pipelines.values()
            if p.writes(table)
        },
        "last_commit": detail.last_modified,
        "location": detail.location,
    }
    row.update(declared_status(spark, loaded, table))
    if format is OutputFormat.table:
        pairs = [{"field": k, "value": v} for k, v in row.items()]
        emit(render(pairs, format, wide=wide, title=f"status of {table}"))
    else:
        emit(render([row], format, wide=wide))


def declared_status(spark: SparkSession, loaded: LakehouseConfig, table: str) -> dict[str, Any]:
    """What the config declares of the table and its state under it, when the config declares
    it: `schema_evolution` and the columns the table has beyond the config's schema (the floor),
    `type_widening` and the columns whose type widened past it;
    for an upsert table its history mode and (SCD type 1) tombstone retention and horizon."""
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from ingest.commit.evolve import columns_beyond
    from ingest.commit.tombstones import horizon
    from tables.delta.evolve import table_types
    from tables.spec_rules import span_text

    specs = {name.lower(): spec for name, spec in loaded.tables.items()}
    spec = specs.get(table.lower())
    if spec is None:
        return {}
    floor = spec.data_schema(spark)
    added = columns_beyond(spark, table, floor)
    held = table_types(spark, table, floor.fieldNames())
    status: dict[str, Any] = {
        "schema_evolution": spec.schema_evolution,
        "added_columns": {f.name: f.dataType.simpleString() for f in added.fields},
        "type_widening": spec.type_widening,
        "widened_columns": {
            name: kind.simpleString() for name, kind in held.items() if kind != floor[name].dataType
        },
    }
    if spec.merge == "upsert":
        status["history"] = spec.history
    if spec.merge == "upsert" and spec.history == "scd1":  # SCD type 2 keeps every delete
        status["tombstone_retention"] = span_text(spec.effective_tombstone_retention)
        status["tombstone_horizon"] = horizon(spark, spec)
    return status


@app.command()
@handle_errors
def history(
    context: typer.Context,
    table: Annotated[str, typer.Argument(help="Table name.")],
    app_id: Annotated[str | None, typer.Option(help="Only batches of this app id.")] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Look at the last N commits only.")
    ] = None,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Show the per-batch ledger the table's log holds, newest first.

    One row per committed batch: app id, batch id, table version, rows read / inserted / already
    present / duplicated in the batch / quarantined, the source, the content hash and the time.
    The table view fits the terminal with the counts of the table's kind; --wide or -f json
    shows every column.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.delta.history import read_ledger
    from tables.identifiers import validate_app_id, validate_table_name

    validate_table_name(table)
    if app_id is not None:
        validate_app_id(app_id)
    spark = spark_for(load_config(config, required=False), context)
    entries = read_ledger(spark, table, app_id=app_id, limit=limit)
    if not entries:
        emit("no batches committed")
        return
    rows = [e.as_row() for e in entries]
    view, shared_app = history_view(rows, upsert=any(e.meta.upsert is not None for e in entries))
    title = f"ledger of {table}" + (f", app {shared_app}" if shared_app is not None else "")
    emit(render(rows, format, title=title, view=view, wide=wide))


@app.command()
@handle_errors
def quality(
    context: typer.Context,
    table: Annotated[str, typer.Argument(help="Table name.")],
    limit: Annotated[int, typer.Option(min=1, help="Show the last N outcomes.")] = 20,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Show the latest audit and expectation outcomes recorded for a table, newest first.

    They live in the `lakehouse_quality` table, which analysts can query by name. Where
    Great Expectations' Data Docs have been built, their index page is printed too.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from quality.check_results import recent_results
    from tables.delta.table import require_table
    from tables.identifiers import validate_table_name

    validate_table_name(table)
    cfg = load_config(config, required=False)
    spark = spark_for(cfg, context)
    require_table(spark, table)
    rows = recent_results(spark, table, limit)
    emit(
        render(rows, format, wide=wide, title=f"quality of {table}")
        if rows
        else "no audit recorded"
    )
    docs = cfg.home / "gx" / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    if docs.exists():
        err.print(f"data docs: {docs.resolve().as_uri()}")


@app.command()
@handle_errors
def check(
    context: typer.Context,
    table: Annotated[str, typer.Argument(help="Table declared in the config.")],
    full: Annotated[
        bool, typer.Option("--full", help="Audit every record key of the table.")
    ] = False,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Delete the later copies of duplicated keys, in one commit."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Answer yes to the --repair question.")
    ] = False,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Run the duplicate-record-key audit over the whole table and record the outcome.

    Exits 1 when a key appears more than once, so a scheduler can alert on it. With --repair,
    the first-landed copy of each key stays and the others are deleted in one commit that the
    ledger records; a passing check or a repair releases a table its `fail` policy held.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from quality.audit import audit_table, repair_duplicates
    from quality.check_results import record
    from tables.engine.clones import SessionClones
    from tables.identifiers import validate_table_name

    validate_table_name(table)
    if not full:
        raise ConfigError("check needs --full: it audits every record key of the table")
    cfg = load_config(config)
    spec = cfg.table(table)
    spark = spark_for(cfg, context)
    with err.status(f"auditing every record key of {table}…"):
        result = audit_table(spark, spec)
    results = [result]
    if repair and result.status == "failed":
        if not yes:
            typer.confirm(
                f"Delete the later copies of {result.failing_keys} duplicated record key(s) "
                f"from {table}?",
                abort=True,
                err=True,
            )
        with err.status(f"deleting later copies of {result.failing_keys} key(s) in {table}…"):
            results.append(repair_duplicates(spark, spec, result, SessionClones()))
    record(spark, results, txn=None)
    emit(render([r.as_row() for r in results], format, wide=wide, title=f"full audit of {table}"))
    if results[-1].status == "failed":
        raise typer.Exit(EXIT_TERMINAL)


#: The rows `sql` prints when `--limit` is not given (fewer when max_rows is lower).
DEFAULT_SQL_ROWS = 1000


@app.command()
@handle_errors
def sql(
    context: typer.Context,
    query: Annotated[str, typer.Argument(help="A Spark SQL statement; tables by name.")],
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Print at most this many rows [default: 1000, or max_rows if lower]; at most "
            "[lakehouse.queries] max_rows.",
            show_default=False,
        ),
    ] = None,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes", help="Operators: also run writes, DDL and commands (asks first)."
        ),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Answer yes to the --allow-writes confirmation.")
    ] = False,
    format: FormatOption = OutputFormat.table,
    wide: WideOption = False,
    config: ConfigOption = None,
) -> None:
    """Run one SQL statement against the lakehouse catalog and print its result.

    Read-only by default: queries (with CTEs, subqueries and views), SHOW, DESCRIBE and EXPLAIN
    run; writes, DDL, SET/RESET, ADD JAR/FILE, reflect/java_method and file paths outside the
    lakehouse home are refused before anything runs, decided on Spark's analysed plan by the same
    rule as `lakehouse serve`. --allow-writes runs a refused statement after a confirmation
    (--yes answers it); writes made this way are not in the ledger. A statement past
    [lakehouse.queries] timeout (5 minutes) is stopped; a result cut at --limit says so.
    """
    # Deferred: Spark and the tables load when a command runs (`lakehouse --help` stays quick).
    from tables.delta.warehouse import register_all
    from tables.engine.limits import collect_within
    from tables.engine.readonly import run_statement

    cfg = load_config(config, required=False)
    if limit is None:
        limit = min(DEFAULT_SQL_ROWS, cfg.limits.max_rows)
    cfg.limits.validate_limit(limit)
    spark = spark_for(cfg, context)
    register_all(spark)
    try:
        frame = run_statement(
            spark,
            query,
            allow_writes=allow_writes,
            confirm=None if yes else (lambda q: typer.confirm(q, abort=True, err=True)),
        )
        names = frame.columns
        found, more = collect_within(spark, frame, limit, cfg.limits.timeout_seconds)
        rows = [r.asDict(recursive=True) for r in found]
    except Exception as exc:
        if type(exc).__module__.startswith("pyspark"):
            raise QueryError(f"SQL failed: {error_summary(exc)}") from exc
        raise
    emit(render(rows, format, wide=wide, columns=names) if names else "OK")
    if more:
        err.print(f"showing the first {limit} rows: the result has more (--limit)", markup=False)


for command in (
    cli_admin.replay,
    cli_admin.vacuum,
    cli_admin.optimize,
    cli_admin.apps,
    cli_admin.reset_app,
    cli_admin.verify,
    cli_admin.backfill_rescued,
    cli_downstream.changes,
    cli_downstream.enable_changes,
    cli_deploy.serve,
):
    app.command(name=command.__name__.replace("_", "-"))(command)
app.command(
    name="job-script",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)(cli_deploy.job_script)
with_reflowed_help(app)


def main() -> None:
    """Entry point of the `lakehouse` console script."""
    app(prog_name="lakehouse", obj=Invocation(owns_process=True))
