"""Table upkeep: VACUUM with safety checks, and OPTIMIZE to compact micro-batch files.

VACUUM deletes files the log no longer references once they are older than the retention. That
removes the table versions time travel needs and the abort debris of failed commits; it never
touches committed data. It is refused below the table's deleted-file retention unless forced, and
always below the replay window, and it lists what it removes before removing it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from tables.delta.commits import commit_session
from tables.delta.table import table_detail
from tables.engine.clones import SessionClones
from tables.engine.storage import file_status
from tables.errors import ConfigError, TerminalError
from tables.identifiers import quote_identifier, validate_column_name, validate_table_name
from tables.spec_rules import parse_interval

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tables.delta.ledger import CommitMetadata

DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
VACUUM_LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"


@dataclass(frozen=True)
class VacuumReport:
    """The paths a VACUUM removed (or, in a dry run, would remove) and their files' total size.

    Delta lists unreferenced data files and the directories left empty; both are removed.
    """

    table: str
    retain_hours: int
    files: tuple[str, ...]
    size_bytes: int
    dry_run: bool


@dataclass(frozen=True)
class OptimizeReport:
    """File counts around an OPTIMIZE, and Delta's own metrics of it."""

    table: str
    files_before: int
    files_after: int
    metrics: dict[str, Any]


def hours(delta: timedelta) -> float:
    """A duration in hours."""
    return delta.total_seconds() / 3600


def check_vacuum_retention(
    retain_hours: int, table_retention: timedelta, replay_window: timedelta, *, force: bool
) -> None:
    """Refuse unsafe retention: below the replay window always, below the table's unless forced."""
    if isinstance(retain_hours, bool) or not isinstance(retain_hours, int) or retain_hours < 0:
        raise ConfigError(f"--retain-hours must be a whole number >= 0, got {retain_hours!r}")
    if retain_hours < hours(replay_window):
        raise ConfigError(
            f"retention {retain_hours:g} h is shorter than the replay window "
            f"({hours(replay_window):g} h): batches inside the window could no longer be replayed "
            "or time-travelled to"
        )
    if retain_hours < hours(table_retention) and not force:
        raise ConfigError(
            f"retention {retain_hours:g} h is below the table's deleted-file retention "
            f"({hours(table_retention):g} h): concurrent readers and writers may still need those "
            "files; pass --force to override"
        )


def table_retention(properties: dict[str, str]) -> timedelta:
    """The table's deleted-file retention (Delta's default: one week)."""
    return parse_interval(properties.get(DELETED_FILE_RETENTION, DEFAULT_DELETED_FILE_RETENTION))


def vacuum(
    spark: SparkSession,
    table: str,
    *,
    retain_hours: int | None,
    replay_window: timedelta,
    dry_run: bool = False,
    force: bool = False,
    before_delete: Callable[[VacuumReport], None] | None = None,
    meta: CommitMetadata | None = None,
    clones: SessionClones | None = None,
) -> VacuumReport:
    """Run VACUUM after the safety checks; list (and size) the files first, always.

    Retention is in whole hours because Delta rounds it to whole hours; without `retain_hours`,
    the table's deleted-file retention or the replay window, whichever is longer.

    `before_delete` sees the listing before anything is deleted; raising there stops the run.
    `meta` is the ledger entry of the commits Delta writes for it (VACUUM START and END, when
    it deletes files); a VACUUM with nothing to delete runs no statement and commits nothing.
    """
    validate_table_name(table)
    detail = table_detail(spark, table)
    retention = table_retention(dict(detail.properties))
    # By default the table's retention, or the replay window where that is longer.
    kept = max(retention, replay_window)
    retain = math.ceil(hours(kept)) if retain_hours is None else retain_hours
    check_vacuum_retention(retain, retention, replay_window, force=force)
    below = retain < hours(retention)
    statement = f"VACUUM {quote_identifier(table)} RETAIN {int(retain)} HOURS"
    # Delta records a VACUUM that deletes files as two commits (START, END) with logging on.
    confs = {VACUUM_LOGGING_CONF: "true", **({RETENTION_CHECK_CONF: "false"} if below else {})}
    with commit_session(spark, clones or SessionClones(), meta, confs) as clone:
        files = tuple(str(r["path"]) for r in clone.sql(f"{statement} DRY RUN").collect())
        _assert_inside(files, detail.location)
        report = VacuumReport(table, retain, files, _total_size(spark, files), dry_run)
        if before_delete is not None:
            before_delete(report)
        if not dry_run and files:
            clone.sql(statement).collect()
    return report


def optimize(
    spark: SparkSession,
    table: str,
    zorder_by: Sequence[str] = (),
    meta: CommitMetadata | None = None,
    clones: SessionClones | None = None,
) -> OptimizeReport:
    """Compact small files (optionally Z-ordering by columns); report file counts around it.

    `meta` is the ledger entry its commit carries (a run's scheduled upkeep records one);
    `clones` the session clones of the caller's writer, if it has one.
    """
    validate_table_name(table)
    for column in zorder_by:
        validate_column_name(column)
    before = table_detail(spark, table)
    columns = set(spark.table(table).columns)
    unknown = [c for c in zorder_by if c not in columns]
    if unknown:
        raise ConfigError(f"--zorder-by columns not in {table}: {unknown}")
    partitioned = [c for c in zorder_by if c in before.partition_columns]
    if partitioned:
        raise ConfigError(f"cannot Z-order by partition columns: {partitioned}")
    statement = f"OPTIMIZE {quote_identifier(table)}"
    if zorder_by:
        statement += f" ZORDER BY ({', '.join(quote_identifier(c) for c in zorder_by)})"
    with commit_session(spark, clones or SessionClones(), meta) as clone:
        row = clone.sql(statement).collect()[0].asDict(recursive=True)
    after = table_detail(spark, table)
    return OptimizeReport(table, before.num_files, after.num_files, dict(row.get("metrics") or {}))


def _assert_inside(files: tuple[str, ...], location: str) -> None:
    root = location.rstrip("/") + "/"
    outside = [f for f in files if not f.startswith(root)]
    if outside:
        raise TerminalError(
            f"VACUUM listed {len(outside)} file(s) outside the table directory {location} "
            f"(e.g. {outside[0]}): refusing to run"
        )


def _total_size(spark: SparkSession, files: tuple[str, ...]) -> int:
    sizes = (file_status(spark, name) for name in files)
    return sum(found[0] for found in sizes if found is not None)
