"""Where a classified batch's rows go: the landed columns, undecodable files, the `fail` policy.

The batch commit (`ingest.commit`) and replay (`ingest.admin.replay`) share these steps; each
works on a classified batch (`quality.malformed.classify`) and decides nothing about Delta.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from quality.malformed import COPY_COLUMN, ROW_HASH_COLUMN, rescued_summary
from quality.quarantine import REASON_COLUMN, SOURCE_COLUMN
from quality.records import FAULT_COLUMN, SOURCE_FILE_COLUMN, magic_codec, undecodable_reason
from tables.errors import UnknownFieldsError
from tables.identifiers import file_of_recorded_path, literal_path
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
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


def undecodable_files(spark: SparkSession, candidates: Collection[str]) -> dict[str, str]:
    """The candidate files whose first bytes are a compression magic number, with the codec.

    A line inside a JSON file may start with a magic number by chance (`BZh`, `PK\x03\x04` are
    printable), so a file is undecodable only when its first line starts with one. Each
    candidate's first line is read back with Spark's text reader (one small job per candidate,
    only when a row starts with a magic number): a public API, where Spark Connect can follow.
    """
    found: dict[str, str] = {}
    for name in sorted(candidates):
        # `_metadata.file_path` is URL-encoded; the reader takes the decoded path, literally.
        first = (
            spark.read.format("text")
            .load(literal_path(file_of_recorded_path(name)))
            .select(magic_codec(F.col("value")).alias("codec"))
            .limit(1)
            .collect()
        )
        if first and first[0]["codec"] is not None:
            found[name] = str(first[0]["codec"])
    return found


def one_row_per_undecodable_file(classified: DataFrame, files: Mapping[str, str]) -> DataFrame:
    """Replace the garbage rows read from undecodable files by one quarantine row per file.

    A compressed file named as plain text reads as lines of random bytes; they are not records,
    so the file itself is the one rejected row, named in `_lh_source` with the reason (from the
    codec its first bytes name, `files` maps each file to it) and no raw text. Its rows are
    dropped, not counted.
    """
    in_files = F.col(SOURCE_FILE_COLUMN).isin(list(files))
    kept = classified.filter(~in_files)
    codecs = F.create_map(*[F.lit(x) for pair in sorted(files.items()) for x in pair])
    reason = undecodable_reason(F.element_at(codecs, F.col(SOURCE_FILE_COLUMN)))
    per_file = (
        classified.filter(in_files)
        .select(SOURCE_FILE_COLUMN)
        .distinct()
        .select(SOURCE_FILE_COLUMN, reason.alias(FAULT_COLUMN))
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
