"""Stream sources: a landing directory of JSON, CSV or Parquet files, read with the table schema.

JSON and CSV are read PERMISSIVE with a corrupt-record column, so a line that does not parse
reaches the commit (and quarantine) instead of failing the stream or vanishing. Each row carries
the file it came from, which the ledger records as the batch's source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from quality.malformed import CORRUPT_COLUMN, SOURCE_FILE_COLUMN
from tables.errors import ConfigError
from tables.identifiers import shorten

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FileFormat = Literal["json", "csv", "parquet"]
DEFAULT_OPTIONS: Mapping[str, Mapping[str, str]] = {
    "json": {},
    "csv": {"header": "true"},
    "parquet": {},
}


@dataclass(frozen=True)
class FileSource:
    """A landing directory that files are dropped into, one format per directory."""

    path: str
    format: FileFormat
    options: Mapping[str, str] = field(default_factory=dict)
    max_files_per_trigger: int | None = None

    def __post_init__(self) -> None:
        if self.format not in get_args(FileFormat):
            raise ConfigError(
                f"unsupported file format {shorten(self.format)}: "
                f"use one of {get_args(FileFormat)}",
                key="format",
            )
        if self.max_files_per_trigger is not None and self.max_files_per_trigger < 1:
            raise ConfigError(
                "max_files_per_trigger must be at least 1", key="max_files_per_trigger"
            )

    def describe(self) -> dict[str, Any]:
        """The source record stored in each batch's ledger entry (with the batch's files)."""
        return {"kind": "files", "format": self.format, "path": self.path}

    @property
    def has_corrupt_column(self) -> bool:
        """True for text formats, which are read PERMISSIVE with a corrupt-record column."""
        return self.format in ("json", "csv")


def read_stream(spark: SparkSession, source: FileSource, schema: StructType) -> DataFrame:
    """Open the landing directory as a stream of rows with the table schema."""
    read_schema, options = _reader_settings(source, schema)
    if source.max_files_per_trigger:
        options["maxFilesPerTrigger"] = str(source.max_files_per_trigger)
    stream = spark.readStream.format(source.format).schema(read_schema).options(**options)
    return _with_reader_columns(stream.load(source.path), source, schema)


def read_files(
    spark: SparkSession, source: FileSource, schema: StructType, files: list[str]
) -> DataFrame:
    """Read given files of the source as one batch, exactly as the stream reads them."""
    read_schema, options = _reader_settings(source, schema)
    frame = spark.read.format(source.format).schema(read_schema).options(**options).load(files)
    return _with_reader_columns(frame, source, schema)


def _reader_settings(source: FileSource, schema: StructType) -> tuple[StructType, dict[str, str]]:
    options = {**DEFAULT_OPTIONS[source.format], **source.options}
    if not source.has_corrupt_column:
        return schema, options
    options.update({"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN})
    return StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType())]), options


def _with_reader_columns(frame: DataFrame, source: FileSource, schema: StructType) -> DataFrame:
    extra = [F.col(CORRUPT_COLUMN)] if source.has_corrupt_column else []
    return frame.select(
        *schema.fieldNames(), *extra, F.col("_metadata.file_path").alias(SOURCE_FILE_COLUMN)
    )
