"""Table specs: a table is declared once, with its schema, record key, partitioning and properties.

Every target table carries three lineage columns, placed first so that Delta collects min/max
statistics on them (it indexes the first 32 columns by default): the MERGE's literal app id and
batch id conditions then skip every file of other batches. The rescued-data column `_lh_rescued`
comes last, after the user columns: it is free JSON text that no query filters on by min/max, so
it should not take one of the 32 statistics slots from a user column, and `ALTER TABLE ... ADD
COLUMNS` appends it there on tables created before it existed, so old and new tables agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from tables.errors import ConfigError, first_line
from tables.identifiers import validate_column_name, validate_table_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

APP_ID_COLUMN = "_lh_app_id"
BATCH_ID_COLUMN = "_lh_batch_id"
INGESTED_AT_COLUMN = "_lh_ingested_at"
LINEAGE_DDL = (
    f"{APP_ID_COLUMN} STRING NOT NULL, {BATCH_ID_COLUMN} BIGINT NOT NULL, "
    f"{INGESTED_AT_COLUMN} TIMESTAMP NOT NULL"
)
#: JSON text of what a row's columns could not hold as delivered (docs/records.md), NULL if nothing.
RESCUED_COLUMN = "_lh_rescued"
RESCUED_DDL = f"{RESCUED_COLUMN} STRING"
RESERVED_PREFIX = "_lh_"

TXN_RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"
DEFAULT_REPLAY_WINDOW = timedelta(days=7)

#: Which existing rows a batch's rows are matched against by record key at MERGE time:
#: `batch` only the same (app id, batch id): retries and replays; `table` every row, whatever
#: its batch; `window` rows whose dedup column lies within the window ending at the batch's
#: newest time.
DedupScope = Literal["batch", "table", "window"]

#: What the post-commit audit does when it finds a record key twice in the table: `warn` records
#: it, `fail` records it and stops the table's pipelines until an operator acts, `repair` also
#: deletes the later copies in a follow-up commit that the ledger records.
AuditPolicy = Literal["warn", "fail", "repair"]

#: What happens to a field the table's schema cannot hold as delivered (a field not in the schema,
#: a case variant of a column, a value converted to fit a STRING column, a key repeated in one
#: object): `rescue` lands the row and keeps the exact original in the `_lh_rescued` column,
#: `quarantine` sends the row to quarantine with a reason, `fail` stops the batch before it commits.
UnknownFields = Literal["rescue", "quarantine", "fail"]

#: What a failing expectation does to its batch: `warn` commits everything and records the failure,
#: `quarantine` sends the failing rows to the quarantine table, `fail` commits nothing and stops.
ExpectationAction = Literal["warn", "quarantine", "fail"]

#: The checks an expectation can declare; each maps to one Great Expectations expectation.
ExpectationCheck = Literal[
    "not_null", "unique", "between", "in_set", "regex", "column_exists", "column_type"
]
_CHECK_PARAMS: Mapping[str, frozenset[str]] = {
    "not_null": frozenset(),
    "unique": frozenset(),
    "between": frozenset({"min", "max"}),
    "in_set": frozenset({"values"}),
    "regex": frozenset({"pattern"}),
    "column_exists": frozenset(),
    "column_type": frozenset({"type"}),
}
_SCHEMA_CHECKS = frozenset({"column_exists", "column_type"})

#: Properties every target table gets unless its spec overrides them.
DEFAULT_PROPERTIES: Mapping[str, str] = {
    "delta.enableChangeDataFeed": "true",
}

_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s+(week|day|hour|minute|second)s?\s*$", re.I)
_UNIT_SECONDS = {"week": 604800, "day": 86400, "hour": 3600, "minute": 60, "second": 1}


def parse_interval(text: str) -> timedelta:
    """Parse a Delta-style interval such as `interval 7 days` or `36 hours`."""
    match = _INTERVAL.match(text)
    if not match:
        raise ConfigError(f"invalid interval {text!r}: expected e.g. 'interval 7 days'")
    amount, unit = int(match.group(1)), match.group(2).lower()
    return timedelta(seconds=amount * _UNIT_SECONDS[unit])


def parse_struct(ddl: str) -> StructType:
    """Parse a Spark DDL column list (`a STRING NOT NULL, b INT`) into a StructType."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    if not isinstance(schema, StructType):
        raise ConfigError(f"schema {ddl!r} is a single type, not a list of columns")
    return schema


def validate_dedup(spec: TableSpec) -> None:
    """Check the dedup scope: `window` needs a time column and a positive window, others none."""
    if spec.dedup not in get_args(DedupScope):
        raise ConfigError(
            f"table {spec.name}: dedup must be one of {get_args(DedupScope)}, got {spec.dedup!r}"
        )
    windowed = spec.dedup_column is not None or spec.dedup_window is not None
    if spec.dedup != "window":
        if windowed:
            raise ConfigError(
                f"table {spec.name}: dedup_column and dedup_window apply to dedup = 'window' only"
            )
        return
    if spec.dedup_column is None or spec.dedup_window is None:
        raise ConfigError(
            f"table {spec.name}: dedup = 'window' needs dedup_column and dedup_window"
        )
    validate_column_name(spec.dedup_column)
    if spec.dedup_window <= timedelta(0):
        raise ConfigError(f"table {spec.name}: dedup_window must be positive")


def validate_txn_retention(properties: Mapping[str, str], replay_window: timedelta) -> None:
    """Refuse a transaction-marker retention shorter than the replay window.

    Delta drops a SetTransaction marker once it is older than this retention; a batch replayed
    after that would no longer be recognised as committed and would be written again.
    """
    value = properties.get(TXN_RETENTION_PROPERTY)
    if value is None:
        return
    if parse_interval(value) < replay_window:
        raise ConfigError(
            f"{TXN_RETENTION_PROPERTY}={value!r} is shorter than the replay window "
            f"({replay_window}): replayed batches older than it would be written twice"
        )


@dataclass(frozen=True)
class ExpectationSpec:
    """One declared rule on a table's rows, and what a batch that breaks it gets.

    Pure data: the quality layer turns it into a Great Expectations expectation. `params` holds
    the check's arguments (`min`/`max`, `values`, `pattern`, `type`).
    """

    table: str
    check: ExpectationCheck
    column: str
    action: ExpectationAction = "warn"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"table {self.table}: expectation {self.check!r}"
        if self.check not in _CHECK_PARAMS:
            raise ConfigError(
                f"table {self.table}: unknown expectation check {self.check!r}; "
                f"use one of {sorted(_CHECK_PARAMS)}"
            )
        if self.action not in get_args(ExpectationAction):
            raise ConfigError(
                f"{where}: action must be one of {get_args(ExpectationAction)}, got {self.action!r}"
            )
        validate_column_name(self.column)
        allowed = _CHECK_PARAMS[self.check]
        unknown = sorted(set(self.params) - allowed)
        if unknown:
            raise ConfigError(f"{where}: unknown argument(s) {unknown}; allowed: {sorted(allowed)}")
        if self.check in _SCHEMA_CHECKS and self.action == "quarantine":
            raise ConfigError(f"{where}: checks a column, not rows, so it cannot quarantine")
        validate_expectation_params(self.check, self.params, where)

    @property
    def name(self) -> str:
        """The check's name in results and errors, e.g. `between(amount)`."""
        return f"{self.check}({self.column})"


def validate_expectation_params(check: str, params: Mapping[str, Any], where: str) -> None:
    """Check the arguments a check needs are there and have the right kind."""
    if check == "between":
        bounds = [params.get("min"), params.get("max")]
        if all(b is None for b in bounds):
            raise ConfigError(f"{where}: needs min, max or both")
        if any(
            b is not None and (isinstance(b, bool) or not isinstance(b, int | float))
            for b in bounds
        ):
            raise ConfigError(f"{where}: min and max must be numbers")
    if check == "in_set":
        values = params.get("values")
        if not isinstance(values, list | tuple) or not values:
            raise ConfigError(f"{where}: values must be a non-empty list")
    if check == "regex":
        pattern = params.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"{where}: pattern must be a non-empty string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{where}: invalid pattern {pattern!r}: {exc}") from exc
    if check == "column_type" and not isinstance(params.get("type"), str):
        raise ConfigError(f"{where}: type must be a Spark type name such as 'DoubleType'")


@dataclass(frozen=True)
class TableSpec:
    """A declared target table: user schema (Spark DDL), record key, partitioning, properties."""

    name: str
    schema_ddl: str
    keys: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    replay_window: timedelta = DEFAULT_REPLAY_WINDOW
    dedup: DedupScope = "batch"
    dedup_column: str | None = None
    dedup_window: timedelta | None = None
    expectations: tuple[ExpectationSpec, ...] = ()
    audit_policy: AuditPolicy = "warn"
    unknown_fields: UnknownFields = "rescue"

    def __post_init__(self) -> None:
        validate_table_name(self.name)
        if not self.schema_ddl.strip():
            raise ConfigError(f"table {self.name}: schema is empty")
        if not self.keys:
            raise ConfigError(f"table {self.name}: declare at least one record key column")
        for column in (*self.keys, *self.partition_by):
            validate_column_name(column)
            if column.startswith(RESERVED_PREFIX):
                raise ConfigError(f"table {self.name}: {column!r} uses the reserved prefix _lh_")
        if len(set(self.keys)) != len(self.keys):
            raise ConfigError(f"table {self.name}: record key columns repeat: {self.keys}")
        validate_txn_retention(self.properties, self.replay_window)
        validate_dedup(self)
        if self.audit_policy not in get_args(AuditPolicy):
            raise ConfigError(
                f"table {self.name}: audit_policy must be one of {get_args(AuditPolicy)}, "
                f"got {self.audit_policy!r}"
            )
        if self.unknown_fields not in get_args(UnknownFields):
            raise ConfigError(
                f"table {self.name}: unknown_fields must be one of {get_args(UnknownFields)}, "
                f"got {self.unknown_fields!r}"
            )

    @property
    def quarantine_name(self) -> str:
        """The name of this table's quarantine table."""
        return f"{self.name}_quarantine"

    @property
    def table_partitions(self) -> tuple[str, ...]:
        """The target's partition columns: the app id first, then the spec's own.

        Delta checks a commit against concurrent ones by the partitions it read. The batch MERGE
        reads only its own app id (a literal in its ON clause), so with the app id as the first
        partition column, writers with distinct app ids never conflict; in an unpartitioned
        table every concurrent append would conflict with every MERGE.
        """
        return (APP_ID_COLUMN, *self.partition_by)

    def table_properties(self) -> dict[str, str]:
        """The Delta properties to create the table with: defaults overlaid by the spec's own."""
        return {**DEFAULT_PROPERTIES, **self.properties}

    def data_schema(self, spark: SparkSession) -> StructType:
        """Parse the user schema with Spark's DDL parser and check keys and partitions exist."""
        try:
            schema = parse_struct(self.schema_ddl)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"table {self.name}: cannot parse schema {self.schema_ddl!r}: {first_line(exc)}"
            ) from exc
        names = [f.name for f in schema.fields]
        for column in names:
            validate_column_name(column)
            if column.startswith(RESERVED_PREFIX):
                raise ConfigError(f"table {self.name}: column {column!r} uses the reserved prefix")
        declared = (
            *self.keys,
            *self.partition_by,
            *filter(None, [self.dedup_column]),
            *(e.column for e in self.expectations if e.check != "column_exists"),
        )
        missing = [c for c in declared if c not in names]
        if missing:
            raise ConfigError(
                f"table {self.name}: key, partition or expectation columns not in schema: {missing}"
            )
        if self.dedup_column is not None:
            kind = schema[self.dedup_column].dataType.typeName()
            if kind not in ("timestamp", "timestamp_ntz", "date"):
                raise ConfigError(
                    f"table {self.name}: dedup_column {self.dedup_column} is {kind}; "
                    "a window needs a timestamp or date column"
                )
        return schema

    def table_schema(self, spark: SparkSession) -> StructType:
        """The full target schema: lineage columns first, then the user columns, then rescued."""
        from pyspark.sql.types import StructType

        lineage = parse_struct(LINEAGE_DDL)
        rescued = parse_struct(RESCUED_DDL)
        return StructType([*lineage.fields, *self.data_schema(spark).fields, *rescued.fields])
