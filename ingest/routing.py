"""One source, many tables: which records go to which target, and where the others go.

A routed pipeline (`route_by` and `routes` in its config) evaluates one SQL expression on each
record, as each target's schema reads it; a record whose value (as text) is one of a route's
values lands in that route's table, and every other record (a value no route names, NULL, or a
record that could not be read) goes to the pipeline's dead-letter table with its reason. Each
target commits the batch under the pipeline's app id with its own marker, as the dead-letter
table does, so a batch is done when all of them hold it: a run cut short between two targets
commits only the missing ones when the batch runs again (the others skip it by their marker).

The route is part of each target's ledger entry (`route_by`, `route`), so `replay` re-reads the
batch and keeps the target's own records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from quality.records import RECORD_COLUMN, STRICT_JSON
from tables.engine.jvm.conditions import has_condition
from tables.errors import ConfigError, error_summary

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from tables.spec import TableSpec

#: Each record's route value, while a batch is routed (never landed).
ROUTE_COLUMN = "_lh_route"
_ROW, _READ = "_lh_route_row", "_lh_route_read"
#: The ledger entry's source record keys of a routed batch.
ROUTE_BY_KEY = "route_by"
ROUTE_KEY = "route"
#: A route value shown in a dead-letter reason is cut to this many characters.
_SHOWN_VALUE_CHARS = 200


@dataclass(frozen=True)
class Route:
    """One target of a routed pipeline: its table and the route values that send records to it."""

    table: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Routing:
    """How a routed pipeline sends each record: `expression` (`route_by`), its routes in the
    order they are committed, and the table for records no route takes."""

    expression: str
    routes: tuple[Route, ...]
    dead_letter: str

    def __post_init__(self) -> None:
        if not self.expression.strip():
            raise ValueError("route_by must be a column name or a SQL expression, got ''")
        if not self.routes:
            raise ValueError("a routed pipeline needs at least one route")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"a route value is given twice: {sorted(self.values)}")

    @property
    def values(self) -> tuple[str, ...]:
        """Every route value, in the routes' order."""
        return tuple(value for route in self.routes for value in route.values)

    @property
    def tables(self) -> tuple[str, ...]:
        """The target tables, in commit order."""
        return tuple(route.table for route in self.routes)

    def route_of(self, table: str) -> Route:
        """The route of a target table (case ignored, as Spark names tables)."""
        for route in self.routes:
            if route.table.lower() == table.lower():
                return route
        raise ValueError(f"table {table} is not a target of route_by {self.expression!r}")

    def reads(self, spark: SparkSession, table: str, schema: StructType) -> StructType:
        """The fields of `table`'s schema the expression reads, or a ConfigError in one line if
        it cannot be evaluated on the table's records.

        Found once per run by leaving each field the expression's text names out in turn: a
        field it cannot do without is one it reads.
        """
        self._assert_resolves(spark, table, schema)
        text = self.expression.lower()
        named = [f for f in schema.fields if f.name.lower() in text]
        kept = list(named)
        for field in named:
            rest = StructType([f for f in kept if f.name != field.name])
            if _resolves(spark, self.expression, rest):
                kept = list(rest.fields)
        return StructType(kept)

    def routed(self, rows: DataFrame, fields: StructType) -> DataFrame:
        """`rows` with ROUTE_COLUMN: each record's route value as text (NULL: none).

        A record read from JSON text (`_lh_record`) is routed by its parsed fields, or where the
        parse left one NULL (a record its target cannot read in full) by its own text read for
        `fields` alone: such a record still reaches its target's quarantine. A field that is not
        in the text (a Kafka coordinate column) comes from the parsed row.
        """
        route = F.expr(self.expression).cast("string").alias(ROUTE_COLUMN)
        if RECORD_COLUMN not in rows.columns or not fields.fields:
            return rows.select("*", route)
        staged = rows.select(
            F.struct(*[F.col(f"`{c}`") for c in rows.columns]).alias(_ROW),
            F.from_json(F.col(RECORD_COLUMN), fields, dict(STRICT_JSON)).alias(_READ),
        )
        scope = staged.select(
            _ROW,
            *[
                F.coalesce(F.col(_ROW).getField(f.name), F.col(_READ).getField(f.name)).alias(
                    f.name
                )
                for f in fields.fields
            ],
        )
        return scope.select(f"{_ROW}.*", route)

    def rows_for(self, rows: DataFrame, table: str, fields: StructType) -> DataFrame:
        """The rows of a batch (read for `table`) that go to `table`."""
        values = self.route_of(table).values
        return self.routed(rows, fields).where(F.col(ROUTE_COLUMN).isin(*values)).drop(ROUTE_COLUMN)

    def recorded(self, table: str) -> dict[str, Any]:
        """What a target's ledger entry says of its route (for replay and for the reader)."""
        return {ROUTE_BY_KEY: self.expression, ROUTE_KEY: list(self.route_of(table).values)}

    def unrouted(self, rows: DataFrame, fields: StructType) -> DataFrame:
        """The rows no route takes (a NULL value included), ROUTE_COLUMN kept for `reason`."""
        route = F.col(ROUTE_COLUMN)
        return self.routed(rows, fields).where(route.isNull() | ~route.isin(*self.values))

    def reason(self, read_reason: Column) -> Column:
        """Why an unrouted record is in the dead-letter table: the reader's reason for a record
        it could not read, else its route value (cut short) and the values routes take."""
        taken = ", ".join(repr(value) for value in self.values)
        value = F.col(ROUTE_COLUMN)
        shown = F.when(
            F.length(value) > _SHOWN_VALUE_CHARS,
            F.concat(F.substring(value, 1, _SHOWN_VALUE_CHARS), F.lit("...")),
        ).otherwise(value)
        return (
            F.when(
                value.isNull() & read_reason.isNotNull(),
                F.concat(F.lit(f"not routed ({self.expression}): "), read_reason),
            )
            .when(value.isNull(), F.lit(f"not routed: route_by {self.expression} is NULL"))
            .otherwise(
                F.concat(
                    F.lit(f"not routed: route_by {self.expression} is '"),
                    shown,
                    F.lit(f"', which no route takes (routes take {taken})"),
                )
            )
        )

    def _assert_resolves(self, spark: SparkSession, table: str, schema: StructType) -> None:
        value = F.expr(self.expression).cast("string")
        frame = spark.createDataFrame([], schema)
        try:
            frame.where(value.isin("")).schema  # noqa: B018
        except AnalysisException as exc:
            raise ConfigError(
                f"route_by {self.expression!r} cannot be evaluated on the records of table "
                f"{table}: {error_summary(exc, limit=300)}"
            ) from None
        try:  # Spark refuses a non-deterministic expression in a join condition
            frame.join(spark.range(0), on=value.isNotNull(), how="inner").schema  # noqa: B018
        except AnalysisException as exc:
            if not has_condition(exc, "INVALID_NON_DETERMINISTIC_EXPRESSIONS"):
                raise
            raise ConfigError(
                f"route_by {self.expression!r} is not deterministic: each target reads the "
                "batch on its own, so a record could go to two tables or none; route by the "
                "record's own fields"
            ) from None


def _resolves(spark: SparkSession, expression: str, schema: StructType) -> bool:
    """True if `expression` can be evaluated on rows of `schema`."""
    try:
        spark.createDataFrame([], schema).select(F.expr(expression)).schema  # noqa: B018
    except AnalysisException:
        return False
    return True


def assert_same_rules(specs: Sequence[TableSpec]) -> None:
    """Raise ConfigError unless every target reads records alike (`max_record_bytes`,
    `timestamp_unit`): a record one target could not read and another could would have two
    routes."""
    first = specs[0]
    for spec in specs[1:]:
        if spec.records != first.records:
            raise ConfigError(
                f"tables {first.name} and {spec.name} read records differently "
                f"(max_record_bytes {first.records.max_record_bytes} and "
                f"{spec.records.max_record_bytes}, timestamp_unit {first.records.timestamp_unit}"
                f" and {spec.records.timestamp_unit}): the targets of a routed pipeline must "
                "read a record alike, so that it has one route"
            )


def assert_same_reads(reads: Mapping[str, StructType], expression: str) -> None:
    """Raise ConfigError unless every target reads the route's fields with one type: a record
    must have one route value, whichever target's schema reads it."""
    seen: dict[str, tuple[str, str]] = {}
    for table, fields in reads.items():
        for field in fields.fields:
            shown = field.dataType.simpleString().upper()
            first = seen.setdefault(field.name.lower(), (table, shown))
            if first[1] != shown:
                raise ConfigError(
                    f"route_by {expression!r} reads {field.name} as {first[1]} in table "
                    f"{first[0]} and as {shown} in table {table}: give it one type in every "
                    "target, so each record has one route"
                )


def recorded_route(recorded: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """The route a ledger entry's source record names (`route_by` and its values), if any."""
    expression, values = recorded.get(ROUTE_BY_KEY), recorded.get(ROUTE_KEY)
    if not isinstance(expression, str) or not isinstance(values, Sequence):
        return None
    return expression, tuple(str(value) for value in values)


def routed_rows(
    rows: DataFrame, recorded: Mapping[str, Any], table: str, raw_format: str | None
) -> DataFrame:
    """A re-read batch's rows kept to the route its ledger entry names (all rows if none), read
    as the run read them (`raw_format` "json": the record text where the parse lost a field)."""
    route = recorded_route(recorded)
    if route is None:
        return rows
    expression, values = route
    routing = Routing(expression, (Route(table, values),), dead_letter="")
    schema = StructType([f for f in rows.schema.fields if not f.name.startswith("_lh_")])
    fields = routing.reads(rows.sparkSession, table, schema)
    return routing.rows_for(rows, table, fields if raw_format == "json" else StructType([]))
