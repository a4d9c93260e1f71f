"""A table's change data feed: read between two versions, and turned on for an old table.

Delta records every row a commit inserts, deletes or updates (`_change_type`, `_commit_version`,
`_commit_timestamp`) when the table property `delta.enableChangeDataFeed` is true; every table
this project creates has it (`tables.spec.DEFAULT_PROPERTIES`, the quarantine tables too). A
table created without it gets it from `enable_change_feed`, a metadata-only commit: changes are
recorded from that version on, never before. A reader that asks for versions the feed does not
cover gets one line naming the first version it does, or the command that turns it on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from tables.delta.history import table_version
from tables.delta.table import require_table, table_detail
from tables.engine.jvm.conditions import has_condition
from tables.errors import ChangeFeedError
from tables.identifiers import quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"
CHANGE_COLUMNS = ("_commit_version", "_change_type", "_commit_timestamp")


def is_change_feed_on(properties: Mapping[str, str]) -> bool:
    """True if a table's properties turn its change data feed on."""
    return str(properties.get(CHANGE_FEED_PROPERTY, "")).strip().lower() == "true"


@dataclass(frozen=True)
class ChangeRange:
    """The versions a read of the feed covers, both inclusive; empty when `since` is past them."""

    since: int
    until: int

    @property
    def is_empty(self) -> bool:
        """True when no version lies in the range (the table has nothing newer yet)."""
        return self.since > self.until


def change_range(table: str, since: int, until: int | None, latest: int) -> ChangeRange:
    """The versions to read: `since` up to `until` or the latest; raise for versions not there.

    `since` one past the latest is an empty range, not an error: a consumer that asks again with
    one above the version it read last finds nothing new.
    """
    if since < 0:
        raise ChangeFeedError(f"table {table}: --since must be 0 or more, got {since}")
    if until is not None and until < since:
        raise ChangeFeedError(f"table {table}: --until {until} is below --since {since}")
    if until is not None and until > latest:
        raise ChangeFeedError(
            f"table {table}: --until {until} is past its latest version, {latest}"
        )
    if since > latest + 1:
        raise ChangeFeedError(
            f"table {table}: --since {since} is past its latest version, {latest} "
            f"(the next version to read is at most {latest + 1})"
        )
    return ChangeRange(since, latest if until is None else until)


def feed_start(history: Iterable[Mapping[str, Any]]) -> int | None:
    """The version from which the feed has recorded changes, from `DESCRIBE HISTORY` rows.

    It is the newest commit that set the property true (the table's creation with it, or an
    ALTER TABLE ... SET TBLPROPERTIES); None if history holds no such commit (it may be older
    than the log's retention).
    """
    found: int | None = None
    for row in history:
        parameters = row.get("operationParameters") or {}
        try:
            properties = json.loads(parameters.get("properties") or "{}")
        except ValueError:
            continue
        if isinstance(properties, dict) and is_change_feed_on(properties):
            version = int(row["version"])
            found = version if found is None else max(found, version)
    return found


def assert_change_feed_on(spark: SparkSession, table: str) -> None:
    """Raise ChangeFeedError naming the fix if the table's change data feed is off."""
    if not is_change_feed_on(table_detail(spark, table).properties):
        raise ChangeFeedError(
            f"table {table}: its change data feed is off ({CHANGE_FEED_PROPERTY} is not true); "
            f"turn it on with `lakehouse enable-changes {table}` (changes are recorded from "
            "then on, not before)"
        )


def read_changes(
    spark: SparkSession, table: str, since: int, until: int | None = None
) -> tuple[DataFrame, ChangeRange]:
    """The table's changes from version `since` to `until` (default: the latest), and the range.

    The range is pinned before the read, so a consumer can store `until` and ask next from one
    above it. The frame has the change columns first, then the table's, ordered by version.
    """

    require_table(spark, table)
    assert_change_feed_on(spark, table)
    versions = change_range(table, since, until, table_version(spark, table))
    if versions.is_empty:
        frame = spark.table(table).limit(0)
        for name, kind in zip(CHANGE_COLUMNS, ("bigint", "string", "timestamp"), strict=True):
            frame = frame.withColumn(name, F.lit(None).cast(kind))
    else:
        frame = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", versions.since)
            .option("endingVersion", versions.until)
            .table(table)
        )
    data = [c for c in frame.columns if c not in CHANGE_COLUMNS]
    ordered = frame.select(*CHANGE_COLUMNS, *data).orderBy("_commit_version", "_change_type")
    return ordered, versions


def missing_changes_error(spark: SparkSession, table: str, exc: BaseException) -> ChangeFeedError:
    """The one line for a read of versions the feed did not record (it was off then)."""
    start = feed_start(_property_history(spark, table))
    where = (
        f"from version {start} on; read with --since {start} or later"
        if start is not None
        else "only for versions the log no longer describes"
    )
    return ChangeFeedError(
        f"table {table}: its change data feed was off for part of the versions asked "
        f"(Delta: DELTA_MISSING_CHANGE_DATA); it holds changes {where}"
    )


def is_missing_changes(exc: BaseException) -> bool:
    """True for Delta's error on a read of versions whose changes were not recorded."""
    return has_condition(exc, "DELTA_MISSING_CHANGE_DATA")


def enable_change_feed(spark: SparkSession, table: str) -> tuple[int, bool]:
    """Turn the table's change data feed on; the version it holds changes from, and whether
    this call turned it on (False: it already was on)."""
    require_table(spark, table)
    if is_change_feed_on(table_detail(spark, table).properties):
        start = feed_start(_property_history(spark, table))
        return (start if start is not None else 0), False
    spark.sql(
        f"ALTER TABLE {quote_identifier(table)} "
        f"SET TBLPROPERTIES ('{CHANGE_FEED_PROPERTY}' = 'true')"
    )
    return table_version(spark, table), True


def _property_history(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    """Every commit's version and operation parameters (DESCRIBE HISTORY, also over Connect)."""
    history = spark.sql(f"DESCRIBE HISTORY {quote_identifier(table)}")
    return [r.asDict() for r in history.select("version", "operationParameters").collect()]
