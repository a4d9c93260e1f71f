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
from typing import TYPE_CHECKING, Any, get_args

from ingest.sources.backlog import Backlog, files_pending
from ingest.sources.file_options import reader_options
from ingest.sources.file_read import (
    FileFormat,
    parse_raw,
    read_files,
    read_stream,
    suspects,
    vetted_json,
)
from ingest.sources.fingerprint import file_statuses, files_fingerprint, with_fingerprint
from ingest.sources.long_lines import recorded_form, remove_copies
from tables.engine.storage import exists, recorded_location, walk_files
from tables.errors import ConfigError
from tables.identifiers import file_of_recorded_path, shorten

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ingest.sources.resume import ResumePoint
    from tables.record_rules import RecordRules
    from tables.spec import TableSpec


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
        self,
        spark: SparkSession,
        schema: StructType,
        *,
        starting_offsets: str | None = None,
        rules: RecordRules | None = None,
    ) -> DataFrame:
        """The landing directory as a stream of raw records (`stream_batch` parses each batch).

        `starting_offsets` is for Kafka; ignored.
        """
        return read_stream(spark, self, schema)

    @contextmanager
    def stream_batch(
        self, batch: DataFrame, spec: TableSpec, files: Sequence[str] | None = None
    ) -> Iterator[tuple[DataFrame, dict[str, Any]]]:
        """The stream's raw micro-batch parsed for `spec`, and the record of its files.

        `files` are the batch's files (a stream's, from its checkpoint: `ingest.checkpoint
        .batch_source_files`; else the batch's plan lists them). The record carries the
        fingerprint of the files (their sizes and modification times);
        the commit adds the list of files the rows came from. A JSON batch with a file that may
        hold a line past the table's `max_record_bytes` is read again around such lines
        (`ingest.sources.long_lines`); the copies made for it are removed afterwards.
        """
        spark = batch.sparkSession
        named = batch.inputFiles() if files is None else files
        statuses = file_statuses(spark, [recorded_form(name) for name in named])
        record = with_fingerprint(self.describe(), files_fingerprint(statuses))
        schema, rules = spec.data_schema(spark), spec.records
        sizes = {file_of_recorded_path(name): found for name, found in statuses.items()}
        if self.format != "json" or not suspects(sizes, rules):
            yield parse_raw(batch, self, schema, rules), record
            return
        frame, made = vetted_json(spark, self, schema, sizes, rules)
        try:
            yield frame, record
        finally:
            remove_copies(spark, made)

    def read_recorded(
        self,
        spark: SparkSession,
        schema: StructType,
        recorded: Mapping[str, Any],
        rules: RecordRules | None = None,
    ) -> DataFrame:
        """The files the record names, read as the stream reads them."""
        return read_files(spark, self, schema, recorded_files(recorded), rules)

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
