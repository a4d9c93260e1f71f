"""The ledger as a SQL view: `<table>_ledger`, one row per lakehouse commit, queried by name.

The ledger lives in each commit's `commitInfo.userMetadata` (`tables.delta.ledger`). `DESCRIBE
HISTORY` shows it, but a command's output cannot be a relation, so an analyst could not filter, join
or aggregate it. The view reads the commit files themselves, `_delta_log/<version>.json`, as Delta's
PROTOCOL.md describes them: each line is one action, and a commit's `commitInfo` line carries the
metadata and the operation's metrics. It is a plain view over Spark's text reader, so it is
always current, costs no write, and reaches back as far as the log keeps commit files
(`delta.logRetentionDuration`, as `history` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tables.identifiers import literal_path, quote_identifier, sql_string_literal
from tables.spec import QUARANTINE_SUFFIX, TOMBSTONES_SUFFIX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LEDGER_VIEW_SUFFIX = "_ledger"
#: Tables whose commits carry no ledger of their own: no view is made for them.
_NOT_LEDGERED = (QUARANTINE_SUFFIX, TOMBSTONES_SUFFIX, LEDGER_VIEW_SUFFIX)
_QUALITY_TABLE = "lakehouse_quality"
_COMMIT_INFO = (
    "commitInfo STRUCT<timestamp: BIGINT, operation: STRING, "
    "operationMetrics: MAP<STRING, STRING>, userMetadata: STRING>"
)
#: The view's columns, in order, with what each says.
LEDGER_COLUMNS = (
    "table_name",
    "version",
    "committed_at",
    "operation",
    "app_id",
    "batch_id",
    "kind",
    "rows_read",
    "rows_inserted",
    "rows_already_present",
    "rows_updated",
    "rows_deleted",
    "rows_ignored_older",
    "rows_after_horizon",
    "rows_duplicate_in_batch",
    "rows_quarantined",
    "content_hash",
    "audit_status",
    "source",
)


def ledger_view_name(table: str) -> str:
    """The name of a table's ledger view: `events` -> `events_ledger` (same database)."""
    return f"{table}{LEDGER_VIEW_SUFFIX}"


def should_have_ledger_view(table: str) -> bool:
    """True for a table whose commits may carry ledger entries (not quarantine, quality, views)."""
    short = table.rsplit(".", 1)[-1].lower()
    return not short.endswith(_NOT_LEDGERED) and short != _QUALITY_TABLE


def ledger_view_sql(table: str, location: str, *, replace: bool = True) -> str:
    """The CREATE VIEW statement of `table`'s ledger view over the log at `location`."""
    log_files = f"{literal_path(location.rstrip('/'))}/_delta_log/*.json"
    create = "CREATE OR REPLACE VIEW" if replace else "CREATE VIEW IF NOT EXISTS"
    meta = "c.userMetadata"
    metric = "c.operationMetrics"
    inserted = (
        f"CAST(coalesce({metric}['numTargetRowsInserted'], {metric}['numOutputRows'], '0') "
        "AS BIGINT)"
    )
    merged = f"coalesce(CAST({metric}['numSourceRows'] AS BIGINT), {inserted})"
    read = f"CAST(get_json_object({meta}, '$.rows_read') AS BIGINT)"
    quarantined = f"CAST(get_json_object({meta}, '$.rows_quarantined') AS BIGINT)"
    updated = f"CAST(coalesce({metric}['numTargetRowsUpdated'], '0') AS BIGINT)"
    deleted = f"CAST(coalesce({metric}['numTargetRowsDeleted'], '0') AS BIGINT)"
    upsert = f"get_json_object({meta}, '$.upsert')"

    def counted(name: str) -> str:
        return f"coalesce(CAST(get_json_object({meta}, '$.upsert.{name}') AS BIGINT), 0)"

    before_merge = f"{counted('superseded')} + {counted('after_tombstone')}"
    return f"""{create} {quote_identifier(ledger_view_name(table))} AS
SELECT
  {sql_string_literal(table)} AS table_name,
  version,
  timestamp_millis(c.timestamp) AS committed_at,
  c.operation AS operation,
  get_json_object({meta}, '$.app_id') AS app_id,
  CAST(get_json_object({meta}, '$.batch_id') AS BIGINT) AS batch_id,
  get_json_object({meta}, '$.kind') AS kind,
  {read} AS rows_read,
  {inserted} AS rows_inserted,
  CASE WHEN {upsert} IS NULL THEN {merged} - {inserted} ELSE 0 END AS rows_already_present,
  {updated} AS rows_updated,
  {deleted} AS rows_deleted,
  CASE WHEN {upsert} IS NULL THEN 0
    ELSE {before_merge} + {merged} - {inserted} - {updated} - {deleted} END AS rows_ignored_older,
  {counted("after_horizon")} AS rows_after_horizon,
  {read} - {quarantined} - ({before_merge}) - {merged} AS rows_duplicate_in_batch,
  {quarantined} AS rows_quarantined,
  get_json_object({meta}, '$.content_hash') AS content_hash,
  get_json_object({meta}, '$.audit.status') AS audit_status,
  get_json_object({meta}, '$.source') AS source
FROM (
  SELECT
    CAST(regexp_extract(_metadata.file_name, '^([0-9]+)[.]json$', 1) AS BIGINT) AS version,
    from_json(value, '{_COMMIT_INFO}').commitInfo AS c
  FROM text.`{log_files.replace("`", "``")}`
  WHERE startswith(value, '{{"commitInfo"')
)
WHERE version IS NOT NULL AND get_json_object(c.userMetadata, '$.lakehouse') IS NOT NULL"""


def create_ledger_view(
    spark: SparkSession, table: str, location: str, *, replace: bool = True
) -> str | None:
    """Create (or replace) `table`'s ledger view; its name, or None for a table without one.

    `location` is the table's (its log is what the view reads). `replace=False` leaves an
    existing view alone: a shared metastore gets the view once, with the table, and later
    sessions issue no DDL.
    """
    if not should_have_ledger_view(table):
        return None
    spark.sql(ledger_view_sql(table, location, replace=replace))
    return ledger_view_name(table)
