"""Upserts (`merge = "upsert"`): one row per record key, the newest version by `sequence_by` wins.

A batch's landable rows are reduced to the newest version of each key (the older versions in the
batch are counted, not written), versions not newer than a delete already recorded for their key
are dropped and counted, and one MERGE applies the rest: an update where the batch's version is
newer than the table's, an insert for a key the table lacks, a delete where the delete rule
holds and the table's version is older. A version that is not newer than the table's changes
nothing, so a resent or replayed version is a no-op whatever its batch id.

A deleted key leaves no row to compare a late older version with, so a delete is first recorded
in `<table>_tombstones` (key, sequence value, lineage): a MERGE that keeps the newest delete of
each key, idempotent by content, so a retry after a crash between it and the target's MERGE
writes nothing new. The tombstone table is written before the target and only by batches with
deletes; it grows by one row per deleted key until `tombstone_retention` expires the oldest
(`ingest.commit.tombstones`: a version below the horizon that brings a key back is counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from ingest.commit.merge import error_kind_of
from ingest.commit.tombstones import count_after_horizon, horizon_of
from ingest.decisions import key_match
from tables.delta.commits import MergeStatement, merge_into
from tables.delta.ledger import HISTORY_ROWS
from tables.delta.table import create_table, table_exists
from tables.delta.writer import TableWriter
from tables.errors import ConfigError, first_line
from tables.identifiers import quote_identifier, shorten
from tables.spec import (
    APP_ID_COLUMN,
    BATCH_ID_COLUMN,
    INGESTED_AT_COLUMN,
    LINEAGE_DDL,
    parse_struct,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from tables.spec import TableSpec

#: The MERGE source's flag: this version deletes its key.
DELETE_COLUMN = "_lh_delete"


@dataclass(frozen=True)
class UpsertPlan:
    """What an upsert batch's MERGE applies, and what it dropped before the MERGE."""

    source: DataFrame
    """The newest version of each key, not older than a tombstone, with `DELETE_COLUMN`."""
    counts: dict[str, int]
    """`tables.delta.ledger.UPSERT_COUNTS`: superseded, after_tombstone, upserts, deletes,
    after_horizon."""
    tombstones: DataFrame | None = None
    """SCD type 2: the batch's deletes (flagged `DELETE_COLUMN`), kept apart from the source."""
    held: int = 0
    """SCD type 2: the batch's versions and deletes the table already had (a replay's)."""

    @property
    def landing(self) -> int:
        """How many rows the MERGE's source holds: one per key, or on an SCD type 2 table the
        history rows it changes (`HISTORY_ROWS`)."""
        if HISTORY_ROWS in self.counts:
            return self.counts[HISTORY_ROWS]
        return self.counts["upserts"] + self.counts["deletes"]


def delete_rule(spark: SparkSession, spec: TableSpec, schema: StructType) -> Column:
    """The spec's `delete_when` as a boolean column (NULL counts as false), checked on `schema`.

    A rule that does not parse, names a column the schema lacks, or is not a condition is one
    line naming the key, before anything is written.
    """
    if spec.delete_when is None:
        return F.lit(False)
    where = spec.where("delete_when")
    try:
        probe = spark.createDataFrame([], schema).select(F.expr(spec.delete_when).alias("rule"))
        kind = probe.schema["rule"].dataType.typeName()
    except Exception as exc:
        raise ConfigError(
            f"{where}: cannot use {shorten(spec.delete_when)}: {first_line(exc)}",
            key="delete_when",
            reason=first_line(exc),
        ) from None
    if kind != "boolean":
        raise ConfigError(
            f"{where}: {shorten(spec.delete_when)} is {kind}, not a condition",
            key="delete_when",
            reason=f"is {kind}, not a condition",
        )
    return F.coalesce(F.expr(spec.delete_when), F.lit(False))


def plan_upsert(
    spark: SparkSession, spec: TableSpec, schema: StructType, landable: DataFrame, landing: int
) -> UpsertPlan:
    """Reduce `landable` (`landing` rows, one per key and sequence value) to the MERGE source.

    One job counts what the reduction and the tombstones drop; the MERGE recomputes the source
    from the persisted batch, the same rows.
    """
    sequence = _sequence(spec)
    newest = Window.partitionBy(*[F.col(k) for k in spec.keys]).orderBy(F.col(sequence).desc())
    reduced = (
        landable.withColumn(DELETE_COLUMN, delete_rule(spark, spec, schema))
        .withColumn("_lh_rank", F.row_number().over(newest))
        .where(F.col("_lh_rank") == 1)
        .drop("_lh_rank")
    )
    older, below_horizon = F.lit(False), F.lit(False)
    if table_exists(spark, spec.tombstones_name):
        line = horizon_of(spark, spec)
        if line is not None:
            kind = landable.schema[sequence].dataType
            below_horizon = F.coalesce(F.col(sequence) <= F.lit(line).cast(kind), F.lit(False))
        tombstones = spark.table(spec.tombstones_name).select(
            *spec.keys, F.col(sequence).alias("_lh_tombstone")
        )
        reduced = reduced.join(tombstones, on=list(spec.keys), how="left")
        tomb, seq = F.col("_lh_tombstone"), F.col(sequence)
        # A tombstone at the same sequence value is this delete's own (a retry): apply it again.
        older = F.coalesce((tomb > seq) | ((tomb == seq) & ~F.col(DELETE_COLUMN)), F.lit(False))
    reduced = reduced.withColumn("_lh_after_tombstone", older)
    after_tombstone = F.col("_lh_after_tombstone")
    revived = ~after_tombstone & ~F.col(DELETE_COLUMN) & below_horizon
    row = reduced.agg(
        F.count(F.lit(1)).alias("keys"),
        F.sum(after_tombstone.cast("int")).alias("after_tombstone"),
        F.sum((~after_tombstone & F.col(DELETE_COLUMN)).cast("int")).alias("deletes"),
        F.sum(revived.cast("int")).alias("below_horizon"),
    ).collect()[0]
    keys, dropped = int(row["keys"]), int(row["after_tombstone"] or 0)
    deletes = int(row["deletes"] or 0)
    source = reduced.where(~after_tombstone).select(*landable.columns, DELETE_COLUMN)
    candidates = reduced.where(revived).select(*spec.keys)
    counts = {
        "superseded": landing - keys,
        "after_tombstone": dropped,
        "upserts": keys - dropped - deletes,
        "deletes": deletes,
        "after_horizon": count_after_horizon(
            spark, spec, candidates, int(row["below_horizon"] or 0)
        ),
    }
    return UpsertPlan(source, counts)


def upsert_clauses(spec: TableSpec, columns: list[str]) -> list[str]:
    """The MERGE clauses of an upsert: newer versions update or delete, new keys insert.

    The columns are listed, not `*`: the source's delete flag is not a column of the table.
    """
    column = quote_identifier(_sequence(spec))
    # A row without a sequence value (landed before the table was an upsert table) is older.
    newer = f"(t.{column} IS NULL OR s.{column} > t.{column})"
    flag = f"s.{quote_identifier(DELETE_COLUMN)}"
    update, insert = copy_clauses([c for c in columns if c != DELETE_COLUMN])
    return [
        f"WHEN MATCHED AND {flag} AND {newer} THEN DELETE",
        f"WHEN MATCHED AND NOT {flag} AND {newer} THEN {update}",
        f"WHEN NOT MATCHED AND NOT {flag} THEN {insert}",
    ]


def copy_clauses(columns: list[str]) -> tuple[str, str]:
    """`UPDATE SET t.c = s.c, ...` and `INSERT (c, ...) VALUES (s.c, ...)` over `columns`."""
    names = [quote_identifier(c) for c in columns]
    update = "UPDATE SET " + ", ".join(f"t.{c} = s.{c}" for c in names)
    insert = f"INSERT ({', '.join(names)}) VALUES ({', '.join(f's.{c}' for c in names)})"
    return update, insert


def write_tombstones(writer: TableWriter, source: DataFrame, schema: StructType) -> None:
    """Record the source's deletes in `<table>_tombstones`, keeping the newest per key (every
    delete, on an SCD type 2 table).

    Idempotent by content: the same deletes again change nothing, so no marker is needed.
    """
    spark, spec = writer.spark, writer.spec
    sequence = _sequence(spec)
    columns = [APP_ID_COLUMN, BATCH_ID_COLUMN, INGESTED_AT_COLUMN, *spec.keys, sequence]
    deletes = source.where(F.col(DELETE_COLUMN)).select(*columns)
    kept = [StructField(f.name, f.dataType) for f in schema.fields if f.name in columns]
    create_table(
        spark,
        spec.tombstones_name,
        StructType([*parse_struct(LINEAGE_DDL).fields, *kept]),
        properties={},
    )
    newer = f"s.{quote_identifier(sequence)} > t.{quote_identifier(sequence)}"
    update, insert = copy_clauses(columns)
    clauses = [f"WHEN MATCHED AND {newer} THEN {update}", f"WHEN NOT MATCHED THEN {insert}"]
    on = key_match(spec.keys)
    if spec.history == "scd2":  # every delete is history: kept by key and sequence value
        on, clauses = key_match((*spec.keys, sequence)), [f"WHEN NOT MATCHED THEN {insert}"]
    try:
        merge = MergeStatement(spec.tombstones_name, deletes, on, clauses)
        merge_into(merge, writer.clones)
    except Exception as exc:  # a lost race is transient like the target's; the rest named
        raise error_kind_of(exc) from exc


def _sequence(spec: TableSpec) -> str:
    if spec.sequence_by is None:
        raise ValueError(f"table {spec.name} is not an upsert table (no sequence_by)")
    return spec.sequence_by
