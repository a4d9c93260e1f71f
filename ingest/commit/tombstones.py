"""Tombstones with a horizon: an upsert table forgets a delete after `tombstone_retention`.

A deleted key's tombstone (`<table>_tombstones`, `ingest.commit.upsert`) is what keeps a late,
older version of the key from bringing it back. Kept forever, the tombstone table grows by a row
per deleted key. Expiring one is a trade, made visible rather than silent:

- `expire_tombstones` deletes the tombstones recorded (`_lh_ingested_at`) before now minus the
  retention, at the table's VACUUM (`lakehouse vacuum`, or a run's scheduled upkeep). First it
  raises the table's **horizon**, the newest sequence value any expired tombstone held, kept as
  the tombstone table's property `lakehouse.tombstoneHorizon`; then it deletes. Both commits carry
  a ledger entry of kind `maintenance`. A crash between them leaves the horizon raised and the
  tombstones there: the next expiry deletes them.
- A batch's version at or below the horizon, for a key the table lacks, may be a deleted key
  coming back: it lands (nothing remembers the delete) and is counted as `after_horizon` in its
  ledger entry (`rows_after_horizon` in `history`), and the run's line says so.
- `verify` checks that no current row is older than a live tombstone of its key.

The horizon is one value for the table: exact for a sequence that orders changes across keys (a
log position, a change timestamp); for a per-key version number it counts more rows than came
back, never fewer.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from tables.delta.commits import commit_session
from tables.delta.history import table_at
from tables.delta.ledger import admin_metadata
from tables.delta.table import table_detail, table_exists
from tables.identifiers import quote_identifier
from tables.spec import (
    APP_ID_COLUMN,
    BATCH_ID_COLUMN,
    INGESTED_AT_COLUMN,
    VALID_FROM_COLUMN,
    VALID_TO_COLUMN,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tables.delta.ledger import CommitMetadata
    from tables.delta.writer import TableWriter
    from tables.spec import TableSpec

HORIZON_PROPERTY = "lakehouse.tombstoneHorizon"
#: The app id of the ledger entries `lakehouse vacuum` records when it expires tombstones.
VACUUM_APP_ID = "lakehouse-vacuum"


@dataclass(frozen=True)
class Expiry:
    """What one expiry removed (or, dry, would remove), and the horizon after it."""

    table: str
    expired: int
    horizon: str | None
    cutoff: datetime

    def describe(self) -> str:
        """One line for an operator."""
        cutoff = f"{self.cutoff.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        if not self.expired:
            return f"no tombstone recorded before {cutoff}"
        expired = f"{self.expired} tombstone(s) recorded before {cutoff} expired"
        return f"{expired}; horizon {self.horizon}"


def horizon(spark: SparkSession, spec: TableSpec) -> str | None:
    """The table's tombstone horizon as text (a `sequence_by` value), or None if none expired."""
    if not table_exists(spark, spec.tombstones_name):
        return None
    return horizon_of(spark, spec)


def horizon_of(spark: SparkSession, spec: TableSpec) -> str | None:
    """`horizon` for a caller that already found the tombstone table (one catalog lookup less
    on an upsert batch's path)."""
    return table_detail(spark, spec.tombstones_name).properties.get(HORIZON_PROPERTY)


def expire_tombstones(
    writer: TableWriter, batch_id: int, now: datetime, *, dry_run: bool = False
) -> Expiry:
    """Raise the horizon over, then delete, the tombstones older than the retention (above).

    `batch_id` is the batch the ledger entries follow (a run's last, or -1 for an operator's).
    """
    spark, spec = writer.spark, writer.spec
    cutoff = now - spec.effective_tombstone_retention
    # An SCD type 2 table's deletes are history: kept as long as its rows are.
    scd2 = spec.history == "scd2"
    if scd2 or spec.sequence_by is None or not table_exists(spark, spec.tombstones_name):
        return Expiry(spec.tombstones_name, 0, None, cutoff)
    sequence = F.col(spec.sequence_by)
    old = horizon_of(spark, spec)
    expired = spark.table(spec.tombstones_name).where(F.col(INGESTED_AT_COLUMN) < F.lit(cutoff))
    newest = F.max(sequence)
    if old is not None:
        newest = F.greatest(newest, F.lit(old).cast(expired.schema[spec.sequence_by].dataType))
    row = expired.agg(F.count(F.lit(1)).alias("n"), newest.cast("string").alias("h")).collect()[0]
    count, raised = int(row["n"]), row["h"]
    if not count or dry_run:
        return Expiry(spec.tombstones_name, count, raised if count else old, cutoff)
    table = quote_identifier(spec.tombstones_name)
    literal = str(raised).replace("\\", "\\\\").replace("'", "\\'")
    with commit_session(spark, writer.clones, _entry(writer, batch_id, "horizon")) as clone:
        clone.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('{HORIZON_PROPERTY}' = '{literal}')")
    with commit_session(spark, writer.clones, _entry(writer, batch_id, "expire")) as clone:
        DeltaTable.forName(clone, spec.tombstones_name).delete(
            F.col(INGESTED_AT_COLUMN) < F.lit(cutoff)
        )
    return Expiry(spec.tombstones_name, count, str(raised), cutoff)


def count_after_horizon(
    spark: SparkSession, spec: TableSpec, candidates: DataFrame, at_or_below: int
) -> int:
    """How many of `candidates` (a batch's landing versions at or below the horizon, not
    deletes) are for keys the table lacks: versions that may bring a forgotten delete back.

    Only read when some are at or below it (`at_or_below`), so a batch above the horizon, the
    usual case, pays no read of the table.
    """
    if not at_or_below:
        return 0
    held = spark.table(spec.name).select(*spec.keys)
    return int(candidates.join(held, on=list(spec.keys), how="left_anti").count())


def resurrected(
    spark: SparkSession,
    spec: TableSpec,
    version: int | None = None,
    markers: Mapping[str, int] | None = None,
) -> int:
    """How many of the table's rows are older than a live tombstone of their key (a delete that
    did not hold; on an SCD type 2 table, rows valid across one); `version` pins the read.

    With `markers` (each app's marker at `version`), only the tombstones of batches the table
    holds count: a batch records its deletes before its rows, so while it commits, its
    tombstones are ahead of the version read.
    """
    if spec.sequence_by is None or not table_exists(spark, spec.tombstones_name):
        return 0
    rows = spark.table(spec.name) if version is None else table_at(spark, spec.name, version)
    recorded = spark.table(spec.tombstones_name)
    if markers is not None:
        held = [
            (F.col(APP_ID_COLUMN) == app) & (F.col(BATCH_ID_COLUMN) <= batch)
            for app, batch in markers.items()
        ]
        recorded = recorded.where(reduce(operator.or_, held, F.lit(False)))
    tombstones = recorded.select(*spec.keys, F.col(spec.sequence_by).alias("_lh_tombstone"))
    joined = rows.join(tombstones, on=list(spec.keys))
    delete = F.col("_lh_tombstone")
    if spec.history == "scd2":  # a version valid across a delete of its key
        start, end = F.col(VALID_FROM_COLUMN), F.col(VALID_TO_COLUMN)
        return int(joined.where((start < delete) & (end.isNull() | (end > delete))).count())
    return int(joined.where(F.col(spec.sequence_by) < delete).count())


def _entry(writer: TableWriter, batch_id: int, operation: str) -> CommitMetadata:
    return admin_metadata(
        writer.app_id,
        batch_id,
        "maintenance",
        {"kind": "maintenance", "operation": f"tombstones_{operation}"},
    )
