"""File sources: a landing directory of JSON, CSV or Parquet files, read with the table schema.

JSON files are read as text lines and CSV files whole, both without decoding their bytes, and
parsed by the quality layer (`quality.records`, `quality.csv_records`): every record keeps its
exact text, a line that does not parse reaches the commit (and quarantine) instead of failing
the stream or vanishing, and CSV columns are matched by header name. Parquet is read with the
table schema. Each row carries the file it came from, which the ledger records as the batch's
source. docs/records.md describes what happens to each record.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ingest.sources.backlog import Backlog, files_pending
from ingest.sources.file_options import TEXT_OPTIONS, reader_options
from ingest.sources.fingerprint import files_fingerprint, with_fingerprint
from quality.csv_records import csv_records
from quality.records import CORRUPT_COLUMN, SOURCE_FILE_COLUMN, is_blank_line, json_records
from tables.errors import ConfigError
from tables.identifiers import file_of_recorded_path, literal_path, shorten
from tables.storage import exists, recorded_location, walk_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.sources.resume import ResumePoint
    from tables.spec import TableSpec

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
        # Frozen: the options are replaced once, by the names the readers look up.
        object.__setattr__(self, "options", reader_options(self.format, self.options))

    def describe(self) -> dict[str, Any]:
        """The source record stored in each batch's ledger entry (with the batch's files)."""
        return {"kind": "files", "format": self.format, "path": self.path}

    @property
    def has_corrupt_column(self) -> bool:
        """True for text formats, which are read PERMISSIVE with a corrupt-record column."""
        return self.format in ("json", "csv")

    @classmethod
    def from_record(cls, recorded: Mapping[str, Any]) -> FileSource:
        """The source a batch's ledger record names, with default reader options."""
        return cls(
            path=str(recorded.get("path", "")),
            format=str(recorded.get("format", "json")),  # type: ignore[arg-type]
        )

    @property
    def kind(self) -> str:
        """`files`, as the ledger records it."""
        return "files"

    @property
    def needs_kafka(self) -> bool:
        """False: files need no connector beyond Spark's own readers."""
        return False

    @property
    def location(self) -> str | None:
        """The landing directory."""
        return self.path

    @property
    def raw_format(self) -> str | None:
        """The file format: it says how a quarantined record's text was read."""
        return self.format

    @property
    def reader_options(self) -> Mapping[str, str]:
        """The reader options from the config (`header`, `sep`, ...)."""
        return self.options

    def validate_table_columns(self, table: str, columns: Collection[str]) -> None:
        """Any table can hold files' records: columns are matched by name when read."""

    def assert_present(self, spark: SparkSession) -> None:
        """Raise ConfigError (key `path`) if the landing directory does not exist (any store).

        The caller restates it with the config file and key path, like the local check made
        before Spark starts; only a URI (`s3a://...`) is left to this one.
        """
        if not exists(spark, self.path):
            raise ConfigError(f"landing directory {self.path} does not exist", key="path")

    def resume_point(self, spark: SparkSession, spec: TableSpec, app_id: str) -> ResumePoint | None:
        """None: which files a lost checkpoint had read is not known from the log alone."""
        return None

    def open_stream(
        self, spark: SparkSession, schema: StructType, *, starting_offsets: str | None = None
    ) -> DataFrame:
        """The landing directory as a stream (`starting_offsets` is for Kafka; ignored)."""
        return read_stream(spark, self, schema)

    @contextmanager
    def stream_batch(self, batch: DataFrame) -> Iterator[tuple[DataFrame, dict[str, Any]]]:
        """The batch as it is, and the source's record with the fingerprint of its files.

        The commit adds the list of files the batch's rows came from.
        """
        yield batch, with_fingerprint(self.describe(), files_fingerprint(batch.sparkSession, batch))

    def read_recorded(
        self, spark: SparkSession, schema: StructType, recorded: Mapping[str, Any]
    ) -> DataFrame:
        """The files the record names, read as the stream reads them."""
        return read_files(spark, self, schema, recorded_files(recorded))

    def missing(self, spark: SparkSession, recorded: Mapping[str, Any]) -> list[str]:
        """The recorded files that no longer exist (checked on any store)."""
        files = recorded.get("files")
        names = [str(f) for f in files] if isinstance(files, list) else []
        return [
            file_of_recorded_path(name)
            for name in names
            if not exists(spark, recorded_location(name))
        ]

    def backlog(self, spark: SparkSession, recorded: Sequence[Mapping[str, Any]]) -> Backlog:
        """Files in the landing directory that no recorded batch read (hidden ones left out).

        A file with no record in it is never named by a ledger entry, so it stays pending here
        until the run ends: the count is what a progress bar needs, not an exact plan.
        """
        if not exists(spark, self.path):
            return Backlog("files", None)
        root = self.path.rstrip("/")
        listed = [
            name
            for name in walk_files(spark, self.path)
            if not _is_hidden(name[len(root) :] if name.startswith(root) else name)
        ]
        done = [name for record in recorded for name in recorded_files(record)]
        return Backlog("files", files_pending(listed, done))


def _is_hidden(relative: str) -> bool:
    """True if a path below the landing directory has a part Spark's file source skips."""
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def recorded_files(recorded: Mapping[str, Any]) -> list[str]:
    """The files a batch's ledger record names, as paths (the record keeps them URL-encoded)."""
    files = recorded.get("files")
    return [file_of_recorded_path(str(f)) for f in files] if isinstance(files, list) else []


def read_stream(spark: SparkSession, source: FileSource, schema: StructType) -> DataFrame:
    """Open the landing directory as a stream of rows with the table schema."""
    if source.format == "json":
        options = _text_options(source)
        if source.max_files_per_trigger:
            options["maxFilesPerTrigger"] = str(source.max_files_per_trigger)
        lines = spark.readStream.format("text").options(**options).load(source.path)
        return _json_lines(lines, schema, source.options)
    if source.format == "csv":
        options = _text_options(source)
        if source.max_files_per_trigger:
            options["maxFilesPerTrigger"] = str(source.max_files_per_trigger)
        whole = spark.readStream.format("text").option("wholetext", "true").options(**options)
        return _csv_files(whole.load(source.path), schema, source.options)
    read_schema, options = _reader_settings(source, schema)
    if source.max_files_per_trigger:
        options["maxFilesPerTrigger"] = str(source.max_files_per_trigger)
    stream = spark.readStream.format(source.format).schema(read_schema).options(**options)
    return _with_reader_columns(stream.load(source.path), source, schema)


def read_files(
    spark: SparkSession, source: FileSource, schema: StructType, files: list[str]
) -> DataFrame:
    """Read given files of the source as one batch, exactly as the stream reads them.

    `files` are paths, each read as that one file (glob characters in a name are escaped).
    """
    files = [literal_path(f) for f in files]
    if source.format == "json":
        lines = spark.read.format("text").options(**_text_options(source)).load(files)
        return _json_lines(lines, schema, source.options)
    if source.format == "csv":
        whole = spark.read.format("text").option("wholetext", "true")
        frame = whole.options(**_text_options(source)).load(files)
        return _csv_files(frame, schema, source.options)
    read_schema, options = _reader_settings(source, schema)
    frame = spark.read.format(source.format).schema(read_schema).options(**options).load(files)
    return _with_reader_columns(frame, source, schema)


def _text_options(source: FileSource) -> dict[str, str]:
    return {k: v for k, v in source.options.items() if k in TEXT_OPTIONS}


def _json_lines(lines: DataFrame, schema: StructType, options: Mapping[str, str]) -> DataFrame:
    """JSON lines read as exact text, parsed with the schema (see `quality.records`)."""
    value = F.col("value")
    kept = lines.select(value, F.col("_metadata.file_path").alias(SOURCE_FILE_COLUMN)).where(
        ~is_blank_line(value)
    )
    parse = {k: v for k, v in options.items() if k not in TEXT_OPTIONS}
    return json_records(kept, value, schema, [F.col(SOURCE_FILE_COLUMN)], parse_options=parse)


def _csv_files(files: DataFrame, schema: StructType, options: Mapping[str, str]) -> DataFrame:
    """Whole CSV files (bytes undecoded) split into records by `quality.csv_records`."""
    frame = files.select(
        F.col("value").cast("binary").alias("value"),
        F.col("_metadata.file_path").alias(SOURCE_FILE_COLUMN),
    )
    return csv_records(frame, F.col("value"), schema, options)


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
