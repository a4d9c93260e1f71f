"""Where a classified batch's rows go: the landed columns, undecodable files, the `fail` policy.

The batch commit (`ingest.commit`) and replay (`ingest.admin.replay`) share these steps; each
works on a classified batch (`quality.malformed.classify`) and decides nothing about Delta.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from quality.malformed import (
    COPY_COLUMN,
    ROW_HASH_COLUMN,
    SOURCE_FILE_COLUMN,
    rescued_summary,
)
from quality.quarantine import REASON_COLUMN, SOURCE_COLUMN
from quality.records import FAULT_COLUMN, UNDECODABLE_PREFIX
from tables.errors import UnknownFieldsError
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from tables.spec import TableSpec


def landed_columns(schema: StructType, rows: DataFrame) -> list[Column]:
    """The columns a batch lands with: the schema's, then `_lh_rescued` (NULL if not read)."""
    rescued = (
        F.col(RESCUED_COLUMN)
        if RESCUED_COLUMN in rows.columns
        else F.lit(None).cast("string").alias(RESCUED_COLUMN)
    )
    return [*(F.col(n) for n in schema.fieldNames()), rescued]


def one_row_per_undecodable_file(classified: DataFrame, files: tuple[str, ...]) -> DataFrame:
    """Replace the garbage rows read from undecodable files by one quarantine row per file.

    A compressed file named as plain text reads as lines of random bytes; they are not records,
    so the file itself is the one rejected row, named in `_lh_source` with the reason (taken
    from its first bytes) and no raw text. Its rows are dropped, not counted.
    """
    in_files = F.col(SOURCE_FILE_COLUMN).isin(list(files))
    kept = classified.filter(~in_files)
    undecodable = F.col(FAULT_COLUMN).startswith(UNDECODABLE_PREFIX)
    per_file = (
        classified.filter(in_files & undecodable)
        .groupBy(SOURCE_FILE_COLUMN)
        .agg(F.min(FAULT_COLUMN).alias(FAULT_COLUMN))
    )
    values = {
        SOURCE_FILE_COLUMN: F.col(SOURCE_FILE_COLUMN),
        FAULT_COLUMN: F.col(FAULT_COLUMN),
        REASON_COLUMN: F.col(FAULT_COLUMN),
        SOURCE_COLUMN: F.col(SOURCE_FILE_COLUMN),
        COPY_COLUMN: F.lit(False),
        ROW_HASH_COLUMN: F.xxhash64(F.col(SOURCE_FILE_COLUMN), F.col(FAULT_COLUMN)),
    }
    file_rows = per_file.select(
        *[
            values.get(c, F.lit(None)).cast(classified.schema[c].dataType).alias(c)
            for c in classified.columns
        ]
    )
    return kept.unionByName(file_rows)


def assert_nothing_rescued(classified: DataFrame, spec: TableSpec) -> None:
    """Under `unknown_fields = "fail"`, raise naming the first record with rescued content."""
    rescued = classified.filter(
        F.col(RESCUED_COLUMN).isNotNull() & F.col(REASON_COLUMN).isNull()
        if RESCUED_COLUMN in classified.columns
        else F.lit(False)
    )
    source = F.col(SOURCE_FILE_COLUMN) if SOURCE_FILE_COLUMN in classified.columns else F.lit(None)
    key = F.concat_ws(", ", *[F.concat(F.lit(f"{k}="), F.col(k).cast("string")) for k in spec.keys])
    found = rescued.select(
        source.cast("string").alias("file"),
        key.alias("key"),
        rescued_summary(F.col(RESCUED_COLUMN)).alias("fields"),
    ).first()
    if found is None:
        return
    where = f"file {found['file']}: " if found["file"] else ""
    raise UnknownFieldsError(
        f"{where}record {found['key']}: {found['fields']}; table {spec.name} has "
        "unknown_fields = fail, so nothing of the batch was committed",
        file=found["file"],
        key=found["key"],
        fields=tuple(found["fields"].split("; ")),
    )
