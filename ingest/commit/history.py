"""SCD type 2 (`history = "scd2"`): every version of a key kept, each row valid until the next.

A batch's versions and deletes are placed among the history of their keys: the rows the table
holds for those keys and the deletes recorded for them (`<table>_tombstones`, every delete, by
key and sequence value) are read, the batch's events added, and each key's history is computed
again by one rule. Events in sequence order; a version starts a row unless the event before it is
a version with the same tracked columns (then it carries that row's other columns forward); a row
is valid from its first version until the next event that is not part of it (a version that
starts a row, or a delete); a key's last row is current unless a delete follows it. At one
sequence value a recorded delete wins, then a delete of the batch, then a version the table
holds (at its start, and at its sequence value if it folded later versions in), then the
batch's version: a resent version changes nothing. Versions folded into a row keep only the
newest one's columns: a late version that splits such a row leaves the row's columns on both
sides.

The MERGE applies the difference between that history and the rows held, matched on the key and
`_lh_valid_from`: rows to insert, rows whose columns or validity changed (a current row closed,
a neighbour of a late version cut short), rows folded into an earlier one or replaced by a delete
at their sequence value. The same batch applied again computes the same history and changes
nothing, whatever its batch id. Its deletes are recorded in the tombstones first (idempotent by
content), so a crash between the two commits re-runs to the same history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from ingest.commit.upsert import (
    DELETE_COLUMN,
    UpsertPlan,
    copy_clauses,
    delete_rule,
    upsert_clauses,
    write_tombstones,
)
from ingest.decisions import key_match
from tables.delta.ledger import HISTORY_ROWS
from tables.delta.table import table_exists
from tables.identifiers import quote_identifier
from tables.spec import (
    APP_ID_COLUMN,
    BATCH_ID_COLUMN,
    INGESTED_AT_COLUMN,
    IS_CURRENT_COLUMN,
    RESCUED_COLUMN,
    VALID_FROM_COLUMN,
    VALID_TO_COLUMN,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from tables.delta.writer import TableWriter
    from tables.spec import TableSpec

#: The MERGE source's flag: what to do with the row found by key and `_lh_valid_from`.
ACTION_COLUMN = "_lh_action"
_AT, _ORIGIN, _RANK, _GROUP, _NEXT = "_lh_at", "_lh_origin", "_lh_rank", "_lh_group", "_lh_next"
#: Which event wins at one sequence value of a key: the lowest.
_TOMBSTONE, _BATCH_DELETE, _HELD, _BATCH_VERSION = 0, 1, 2, 3
_LINEAGE = (APP_ID_COLUMN, BATCH_ID_COLUMN, INGESTED_AT_COLUMN)


def tracked_columns(spec: TableSpec, columns: list[str]) -> list[str]:
    """The columns whose change makes a new version: `track_history_columns`, or every data
    column but the keys, `sequence_by` and `except_columns`. Never `_lh_rescued`: fields the
    schema does not declare (a log position a CDC source adds to each change) would make every
    version new; a change there updates the version in place."""
    if spec.track_history_columns:
        return list(spec.track_history_columns)
    fixed = {*spec.keys, str(spec.sequence_by), *spec.except_columns, *_LINEAGE, RESCUED_COLUMN}
    return [c for c in columns if c not in fixed]


def plan_history(
    spark: SparkSession, spec: TableSpec, schema: StructType, batch: DataFrame, landing: int
) -> UpsertPlan:
    """The MERGE source of an SCD type 2 batch: the rows its `landing` versions and deletes
    change (`batch`: lineage, data and rescued columns), with `ACTION_COLUMN`.

    Counts: `upserts` and `deletes` are the batch's versions and deletes placed, `superseded`
    its versions that lost at their sequence value (already held, or deleted there).
    """
    sequence = str(spec.sequence_by)
    keys = list(spec.keys)
    columns = batch.columns
    flag = delete_rule(spark, spec, schema)
    incoming = batch.withColumn(DELETE_COLUMN, flag).select(
        *columns,
        F.col(DELETE_COLUMN),
        F.col(sequence).alias(_AT),
        F.when(F.col(DELETE_COLUMN), _BATCH_DELETE).otherwise(_BATCH_VERSION).alias(_ORIGIN),
    )
    touched = batch.select(*keys).distinct()
    held = spark.table(spec.name).join(touched, on=keys, how="left_semi")
    # A held row is a version at its start and, if it folded later ones in, at the newest of
    # those (its sequence value): a resent folded version meets it there.
    folded = held.where(F.col(sequence) != F.col(VALID_FROM_COLUMN))
    events = incoming
    for rows, at in ((held, VALID_FROM_COLUMN), (folded, sequence)):
        events = events.unionByName(
            rows.select(
                *columns,
                F.lit(False).alias(DELETE_COLUMN),
                F.col(at).alias(_AT),
                F.lit(_HELD).alias(_ORIGIN),
            )
        )
    if table_exists(spark, spec.tombstones_name):
        recorded = spark.table(spec.tombstones_name).join(touched, on=keys, how="left_semi")
        events = events.unionByName(
            recorded.select(
                *keys,
                F.lit(True).alias(DELETE_COLUMN),
                F.col(sequence).alias(_AT),
                F.lit(_TOMBSTONE).alias(_ORIGIN),
            ),
            allowMissingColumns=True,
        )
    at_once = Window.partitionBy(*keys, _AT).orderBy(_ORIGIN)
    ranked = events.withColumn(_RANK, F.row_number().over(at_once))
    version, again = F.col(_ORIGIN) == _BATCH_VERSION, F.col(_RANK) > 1
    row = (
        ranked.where(F.col(_ORIGIN) >= _BATCH_DELETE)
        .agg(
            F.sum(version.cast("int")).alias("versions"),
            F.sum((version & again).cast("int")).alias("lost"),
            F.sum((~version & again).cast("int")).alias("recorded"),
        )
        .collect()[0]
    )
    versions, lost = int(row["versions"] or 0), int(row["lost"] or 0)
    computed = _history(spec, ranked.where(F.col(_RANK) == 1), columns)
    changes = _changes(spec, computed, held, [*columns, *_VALIDITY])
    counted = changes.groupBy(ACTION_COLUMN).count().collect()
    return UpsertPlan(
        source=changes,
        counts={
            "superseded": lost,
            "after_tombstone": 0,
            "upserts": versions - lost,
            "deletes": landing - versions,
            "after_horizon": 0,
            HISTORY_ROWS: sum(int(r["count"]) for r in counted),
        },
        tombstones=incoming.where(F.col(DELETE_COLUMN)),
        held=lost + int(row["recorded"] or 0),
    )


_VALIDITY = (VALID_FROM_COLUMN, VALID_TO_COLUMN, IS_CURRENT_COLUMN)


def _history(spec: TableSpec, events: DataFrame, columns: list[str]) -> DataFrame:
    """Each key's rows from its events, one per sequence value (module docstring)."""
    keys = list(spec.keys)
    ordered = Window.partitionBy(*keys).orderBy(_AT)
    tracked = _tracked(spec, columns)
    delete = F.col(DELETE_COLUMN)
    marked = events.select(
        "*",
        F.lag(delete).over(ordered).alias("_lh_prev_delete"),
        F.lag(tracked).over(ordered).alias("_lh_prev_tracked"),
        F.lead(_AT).over(ordered).alias(_NEXT),
    )
    before = F.col("_lh_prev_delete")
    starts = ~delete & (before.isNull() | before | ~F.col("_lh_prev_tracked").eqNullSafe(tracked))
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    grouped = marked.withColumn(_GROUP, F.sum((delete | starts).cast("int")).over(running))
    values = [c for c in columns if c not in keys]
    last = F.max_by(F.struct(*values, F.col(_NEXT).alias(VALID_TO_COLUMN)), F.col(_AT))
    rows = (
        grouped.where(~delete)
        .groupBy(*keys, _GROUP)
        .agg(F.min(_AT).alias(VALID_FROM_COLUMN), last.alias("_lh_last"))
    )
    return rows.select(
        *keys,
        VALID_FROM_COLUMN,
        "_lh_last.*",
        F.col(f"_lh_last.{VALID_TO_COLUMN}").isNull().alias(IS_CURRENT_COLUMN),
    )


def _tracked(spec: TableSpec, columns: list[str]) -> Column:
    """The tracked columns as one comparable value (a constant if none is tracked)."""
    names = tracked_columns(spec, columns)
    return F.struct(*[F.col(c) for c in names]) if names else F.struct(F.lit(True))


def _changes(spec: TableSpec, computed: DataFrame, held: DataFrame, target: list[str]) -> DataFrame:
    """The rows that differ between the computed history and the rows held, with their action."""
    row_keys = list(spec.row_keys)
    compare = [c for c in target if c not in row_keys]
    new = computed.select(*row_keys, F.struct(*compare).alias("_lh_new"))
    old = held.select(*row_keys, F.struct(*compare).alias("_lh_old"))
    joined = new.join(old, on=row_keys, how="full")
    action = (
        F.when(F.col("_lh_new").isNull(), F.lit("delete"))
        .when(F.col("_lh_old").isNull(), F.lit("insert"))
        .when(~F.col("_lh_new").eqNullSafe(F.col("_lh_old")), F.lit("update"))
    )
    picked = [F.col(c) if c in row_keys else F.col(f"_lh_new.{c}").alias(c) for c in target]
    return joined.select(*picked, action.alias(ACTION_COLUMN)).where(
        F.col(ACTION_COLUMN).isNotNull()
    )


def history_clauses(columns: list[str]) -> list[str]:
    """The MERGE clauses that apply `_changes`: delete, update or insert, as each row says."""
    action = f"s.{quote_identifier(ACTION_COLUMN)}"
    update, insert = copy_clauses([c for c in columns if c != ACTION_COLUMN])
    return [
        f"WHEN MATCHED AND {action} = 'delete' THEN DELETE",
        f"WHEN MATCHED AND {action} = 'update' THEN {update}",
        f"WHEN NOT MATCHED AND {action} = 'insert' THEN {insert}",
    ]


def write_deletes(
    writer: TableWriter, schema: StructType, plan: UpsertPlan, source: DataFrame
) -> tuple[str, list[str]]:
    """Record the batch's deletes as tombstones (if any), then give the MERGE's ON and clauses.

    The one sequence both a batch's commit and a replay run before an upsert's MERGE; `source`
    is the MERGE's source (with lineage), for SCD type 1 the rows the deletes are taken from.
    """
    spec = writer.spec
    if spec.history == "scd2":
        if plan.counts["deletes"] and plan.tombstones is not None:
            write_tombstones(writer, plan.tombstones, schema)
        return key_match(spec.row_keys), history_clauses(source.columns)
    if plan.counts["deletes"]:
        write_tombstones(writer, source, schema)
    return key_match(spec.keys), upsert_clauses(spec, source.columns)


def broken_histories(spec: TableSpec, rows: DataFrame) -> int:
    """How many keys' rows do not chain: in `_lh_valid_from` order each row must end (not
    after the next one starts) and start before it ends, and only the last may be open, the one
    current row (`lakehouse verify`)."""
    keys = list(spec.keys)
    ordered = Window.partitionBy(*keys).orderBy(VALID_FROM_COLUMN)
    start, end = F.col(VALID_FROM_COLUMN), F.col(VALID_TO_COLUMN)
    following = F.lead(VALID_FROM_COLUMN).over(ordered)
    with_next = rows.select(*keys, start, end, F.col(IS_CURRENT_COLUMN), following.alias(_NEXT))
    after = F.col(_NEXT)
    broken = (
        (F.col(IS_CURRENT_COLUMN) != end.isNull())
        | (end.isNotNull() & (end <= start))
        | (after.isNotNull() & (end.isNull() | (end > after)))
    )
    return int(with_next.where(broken).select(*keys).distinct().count())
