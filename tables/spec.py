"""Table specs: a table is declared once, with its schema, record key, partitioning and properties.

Every target table carries three lineage columns, placed first so that Delta collects min/max
statistics on them (it indexes the first 32 columns by default): the MERGE's literal app id and
batch id conditions then skip every file of other batches. The rescued-data column `_lh_rescued`
comes last, after the user columns: it is free JSON text that no query filters on by min/max, so
it should not take one of the 32 statistics slots from a user column, and `ALTER TABLE ... ADD
COLUMNS` appends it there on tables created before it existed, so old and new tables agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

from pyspark.sql.types import BooleanType, StructField, StructType

from tables.ddl import parse_columns
from tables.ddl_types import validate_type
from tables.errors import ConfigError, KeyPath, first_line
from tables.identifiers import case_collisions, shorten, validate_column_name, validate_table_name
from tables.maintenance_policy import MaintenancePolicy
from tables.record_rules import RecordRules
from tables.spec_rules import (
    check_column,
    check_types,
    not_in_schema,
    refusal,
    validate_dedup,
    validate_expectation_params,
    validate_history,
    validate_merge,
    validate_txn_retention,
)

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
#: An SCD type 2 table's validity columns, typed as its `sequence_by` column.
VALID_FROM_COLUMN = "_lh_valid_from"
VALID_TO_COLUMN = "_lh_valid_to"
IS_CURRENT_COLUMN = "_lh_is_current"

#: The project's companion tables of a target `<table>`: its rejected rows, its upsert deletes.
QUARANTINE_SUFFIX = "_quarantine"
TOMBSTONES_SUFFIX = "_tombstones"

DEFAULT_REPLAY_WINDOW = timedelta(days=7)
#: How long an upsert table keeps a deleted key's tombstone when `tombstone_retention` is not set
#: (or twice the replay window, if that is longer): `tables.spec_rules.tombstone_retention`.
DEFAULT_TOMBSTONE_RETENTION = timedelta(days=30)

#: How a batch's rows meet the table: `insert` lands each row whose record key is new within the
#: dedup scope (a log of records); `upsert` keeps one row per record key, the newest version by
#: `sequence_by`, and deletes a key whose newest version matches `delete_when` (SCD type 1).
MergeMode = Literal["insert", "upsert"]

#: What an upsert table keeps of a key's versions: `scd1` the newest only; `scd2` every version,
#: each row valid from its sequence value until the next version's or a delete's
#: (`VALID_FROM_COLUMN`, `VALID_TO_COLUMN`, `IS_CURRENT_COLUMN`; docs/configuration.md#history).
History = Literal["scd1", "scd2"]

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
#: a case variant of a column, a value converted to fit a STRING or DECIMAL column, a key repeated
#: in one object): `rescue` lands the row and keeps the exact original in the `_lh_rescued` column,
#: `quarantine` sends the row to quarantine with a reason, `fail` stops the batch before it commits.
UnknownFields = Literal["rescue", "quarantine", "fail"]

#: What a top-level field no column holds does to its batch: `rescue` leaves it to
#: `unknown_fields`, `add_columns` adds it as a nullable column before the batch lands, `fail`
#: stops the batch naming it, `freeze` quarantines the rows that bring it.
SchemaEvolution = Literal["rescue", "add_columns", "fail", "freeze"]

#: What a failing expectation does to its batch: `warn` commits everything and records the failure,
#: `quarantine` sends the failing rows to the quarantine table, `fail` commits nothing and stops.
ExpectationAction = Literal["warn", "quarantine", "fail"]

#: The checks an expectation can declare; each maps to one Great Expectations expectation.
ExpectationCheck = Literal[
    "not_null", "unique", "between", "in_set", "regex", "column_exists", "column_type"
]
_CHECK_PARAMS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "not_null": frozenset(),
        "unique": frozenset(),
        "between": frozenset({"min", "max"}),
        "in_set": frozenset({"values"}),
        "regex": frozenset({"pattern"}),
        "column_exists": frozenset(),
        "column_type": frozenset({"type"}),
    }
)
_SCHEMA_CHECKS = frozenset({"column_exists", "column_type"})

#: Properties every target table gets unless its spec overrides them.
DEFAULT_PROPERTIES: Mapping[str, str] = MappingProxyType(
    {
        "delta.enableChangeDataFeed": "true",
    }
)


def parse_struct(ddl: str) -> StructType:
    """Parse a Spark DDL column list (`a STRING NOT NULL, b INT`) into a StructType."""

    schema = StructType.fromDDL(ddl)
    if not isinstance(schema, StructType):
        raise ConfigError(f"schema {ddl!r} is a single type, not a list of columns")
    return schema


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
        owner = f"table {self.table}: expectation"
        if self.check not in _CHECK_PARAMS:
            raise refusal(
                owner,
                "check",
                f"unknown expectation check {shorten(self.check)}; "
                f"use one of {sorted(_CHECK_PARAMS)}",
            )
        owner = f"table {self.table}: expectation {self.check!r}"
        if self.action not in get_args(ExpectationAction):
            raise refusal(
                owner,
                "action",
                f"action must be one of {get_args(ExpectationAction)}, got {shorten(self.action)}",
            )
        try:
            validate_column_name(self.column)
        except ConfigError as exc:
            raise refusal(owner, "column", exc.reason) from None
        allowed = _CHECK_PARAMS[self.check]
        unknown = sorted(set(self.params) - allowed)
        if unknown:
            raise refusal(
                owner,
                str(unknown[0]),
                f"unknown argument(s) {', '.join(map(shorten, unknown))}; allowed: "
                f"{', '.join(sorted(allowed)) or 'none'}",
            )
        if self.check in _SCHEMA_CHECKS and self.action == "quarantine":
            raise refusal(owner, "action", "checks a column, not rows, so it cannot quarantine")
        validate_expectation_params(self.check, self.params, owner)

    @property
    def name(self) -> str:
        """The check's name in results and errors, e.g. `between(amount)`."""
        return f"{self.check}({self.column})"


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
    schema_evolution: SchemaEvolution = "rescue"
    #: Widen a column's type in place (INT to BIGINT, FLOAT to DOUBLE, DECIMAL precision) for
    #: values it cannot hold; Delta's `typeWidening` table feature (docs/configuration.md).
    type_widening: bool = False
    merge: MergeMode = "insert"
    sequence_by: str | None = None
    delete_when: str | None = None
    #: How long a deleted key's tombstone is kept (upsert tables; None: the default, see
    #: `effective_tombstone_retention`); longer than the replay window.
    tombstone_retention: timedelta | None = None
    #: What an upsert table keeps of a key's versions, and which columns make a new version
    #: (SCD type 2; empty: every column but the keys and `sequence_by`).
    history: History = "scd1"
    track_history_columns: tuple[str, ...] = ()
    except_columns: tuple[str, ...] = ()
    #: The size limit and epoch unit of incoming records (docs/records.md#limits).
    records: RecordRules = field(default_factory=RecordRules)
    #: When a long run compacts and vacuums the table between batches (off by default).
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    #: Where the spec was declared (`lakehouse.toml: tables.events`), for errors found later.
    origin: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        validate_table_name(self.name)
        owner = f"table {self.name}"
        if self.replay_window <= timedelta(0):
            raise refusal(owner, "replay_window", "must be longer than zero")
        if not self.keys:
            raise refusal(owner, "keys", "declare at least one record key column")
        for key, columns in (("keys", self.keys), ("partition_by", self.partition_by)):
            for column in columns:
                check_column(owner, key, column)
            for group in case_collisions(columns):
                raise refusal(owner, key, f"columns repeat: {', '.join(map(shorten, group))}")
        validate_txn_retention(self.properties, self.replay_window, owner)
        if self.dedup not in get_args(DedupScope):
            raise refusal(
                owner, "dedup", f"must be one of {get_args(DedupScope)}, got {shorten(self.dedup)}"
            )
        validate_dedup(self)
        validate_merge(self)
        validate_history(self)
        if self.audit_policy not in get_args(AuditPolicy):
            raise refusal(
                owner,
                "audit_policy",
                f"must be one of {get_args(AuditPolicy)}, got {shorten(self.audit_policy)}",
            )
        for key, value, allowed in (
            ("unknown_fields", self.unknown_fields, get_args(UnknownFields)),
            ("schema_evolution", self.schema_evolution, get_args(SchemaEvolution)),
        ):
            if value not in allowed:
                raise refusal(owner, key, f"must be one of {allowed}, got {shorten(value)}")
        self._check_columns()

    def _check_columns(self) -> None:
        """Check the schema's column names and every column the spec names, without Spark.

        Type names are read against Spark's type grammar (`tables.ddl_types`); the values of
        type parameters and the clauses after a type are left to Spark's parser (`data_schema`).
        """
        owner = f"table {self.name}"
        if not isinstance(self.schema_ddl, str) or not self.schema_ddl.strip():
            raise refusal(owner, "schema", "schema is empty")
        try:
            columns = parse_columns(self.schema_ddl)
        except ConfigError as exc:
            raise refusal(owner, "schema", f"cannot read the column list: {exc.reason}") from None
        for column in columns:
            check_column(owner, "schema", column.name)
            try:
                validate_type(column.type_text)
            except ConfigError as exc:
                raise refusal(owner, "schema", f"{exc.reason} for column {column.name}") from None
        for group in case_collisions(c.name for c in columns):
            raise refusal(
                owner, "schema", f"column declared twice: {', '.join(map(shorten, group))}"
            )
        by_name = {c.name: c for c in columns}
        named: list[tuple[str | KeyPath, str]] = [
            *(("keys", c) for c in self.keys),
            *(("partition_by", c) for c in self.partition_by),
            *(("dedup_column", c) for c in filter(None, [self.dedup_column])),
            *(("sequence_by", c) for c in filter(None, [self.sequence_by])),
            *(("track_history_columns", c) for c in self.track_history_columns),
            *(("except_columns", c) for c in self.except_columns),
        ]
        for index, expectation in enumerate(self.expectations):
            if expectation.check != "column_exists":
                named.append((("expectations", index, "column"), expectation.column))
        for key, name in named:
            if name not in by_name:
                raise refusal(owner, key, not_in_schema(name, by_name))
        check_types(owner, self, by_name)

    @property
    def effective_tombstone_retention(self) -> timedelta:
        """`tombstone_retention`, or 30 days or twice the replay window, whichever is longer."""
        if self.tombstone_retention is not None:
            return self.tombstone_retention
        return max(DEFAULT_TOMBSTONE_RETENTION, 2 * self.replay_window)

    @property
    def row_keys(self) -> tuple[str, ...]:
        """The columns one row of the table is found by: the record key, and on an SCD type 2
        table the version's start (`VALID_FROM_COLUMN`), since it keeps many rows per key."""
        return (*self.keys, VALID_FROM_COLUMN) if self.history == "scd2" else self.keys

    @property
    def column_names(self) -> tuple[str, ...]:
        """The user column names of the schema, in order, read without Spark."""
        return tuple(c.name for c in parse_columns(self.schema_ddl))

    def where(self, key: str) -> str:
        """How errors name one of this spec's keys: with its file and key path when known."""
        return f"{self.origin}.{key}" if self.origin else f"table {self.name}: {key}"

    @property
    def quarantine_name(self) -> str:
        """The name of this table's quarantine table."""
        return quarantine_table_name(self.name)

    @property
    def tombstones_name(self) -> str:
        """The name of this table's tombstone table (deleted keys of an upsert table)."""
        return f"{self.name}{TOMBSTONES_SUFFIX}"

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
        # Delta's type widening (a reader and writer table feature): on from the start if asked.
        widening = {"delta.enableTypeWidening": "true"} if self.type_widening else {}
        return {**DEFAULT_PROPERTIES, **widening, **self.properties}

    def data_schema(self, spark: SparkSession) -> StructType:
        """Parse the user schema with Spark's DDL parser (the types; names are checked already).

        A parse error is one line naming the schema key, with the file when the spec came from
        one: `lakehouse.toml: tables.events.schema: cannot parse ...`.
        """
        try:
            schema = parse_struct(self.schema_ddl)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, ConfigError) else first_line(exc)
            raise ConfigError(
                f"{self.where('schema')}: cannot parse {shorten(self.schema_ddl)}: {reason}",
                key="schema",
                reason=f"cannot parse: {reason}",
            ) from exc
        if self.dedup_column is not None:
            kind = schema[self.dedup_column].dataType.typeName()
            if kind not in ("timestamp", "timestamp_ntz", "date"):
                raise ConfigError(
                    f"{self.where('dedup_column')}: {self.dedup_column} is {kind}; "
                    "a window needs a timestamp or date column"
                )
        return schema

    def table_schema(self, spark: SparkSession) -> StructType:
        """The full target schema: lineage columns first, then the user columns, then rescued."""

        lineage = parse_struct(LINEAGE_DDL)
        rescued = parse_struct(RESCUED_DDL)
        data = self.data_schema(spark)
        return StructType([*lineage.fields, *data.fields, *rescued.fields, *self._history(data)])

    def _history(self, data: StructType) -> list[StructField]:
        """An SCD type 2 table's validity columns, after the rest (none for other tables)."""
        if self.history != "scd2" or self.sequence_by is None:
            return []
        kind = data[self.sequence_by].dataType
        return [
            StructField(VALID_FROM_COLUMN, kind, nullable=False),
            StructField(VALID_TO_COLUMN, kind),
            StructField(IS_CURRENT_COLUMN, BooleanType(), nullable=False),
        ]


def quarantine_table_name(table: str) -> str:
    """The quarantine table of `table`: `<table>_quarantine`, in the same database."""
    return f"{table}{QUARANTINE_SUFFIX}"
