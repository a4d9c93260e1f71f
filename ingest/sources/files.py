"""File sources: a landing directory of JSON, CSV or Parquet files, read with the table schema.

JSON files are read as text lines and CSV files whole, both without decoding their bytes, and
parsed by the quality layer (`quality.records`, `quality.csv_records`): every record keeps its
exact text, a line that does not parse reaches the commit (and quarantine) instead of failing
the stream or vanishing, and CSV columns are matched by header name. Parquet is read with the
table schema. Each row carries the file it came from, which the ledger records as the batch's
source. docs/records.md describes what happens to each record.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, get_args

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

#: A location's scheme and authority: `s3a://bucket`, `file://`, `file:`.
_STORE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?://([^/]*))?")
#: What becomes of a file once the batch that read it is checkpointed (Spark's `cleanSource`).
CleanSource = Literal["off", "archive", "delete"]


@dataclass(frozen=True)
class FileSource:
    """A landing directory that files are dropped into, one format per directory.

    With `clean_source` Spark moves each file under `archive_dir` (its whole path kept below
    it) or deletes it after the batch that read it is checkpointed: the landing directory, which
    the stream lists every trigger, then holds only what is still to come.
    """

    path: str
    format: FileFormat
    options: Mapping[str, str] = field(default_factory=dict)
    max_files_per_trigger: int | None = None
    clean_source: CleanSource = "off"
    archive_dir: str | None = None

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
        validate_cleaning(self.path, self.clean_source, self.archive_dir)
        # Frozen: the options are replaced once, by the names the readers look up.
        object.__setattr__(self, "options", reader_options(self.format, self.options))

    def describe(self) -> dict[str, Any]:
        """The source record stored in each batch's ledger entry (with the batch's files)."""
        described = {"kind": "files", "format": self.format, "path": self.path}
        if self.archive_dir is not None:  # where a replay finds the files read
            described["archive_dir"] = self.archive_dir
        return described

    @property
    def has_corrupt_column(self) -> bool:
        """True for text formats, which are read PERMISSIVE with a corrupt-record column."""
        return self.format in ("json", "csv")

    @classmethod
    def from_record(cls, recorded: Mapping[str, Any]) -> FileSource:
        """The source a batch's ledger record names, with default reader options."""
        archived = recorded.get("archive_dir")
        archive_dir = archived if isinstance(archived, str) else None
        return cls(
            path=str(recorded.get("path", "")),
            format=str(recorded.get("format", "json")),  # type: ignore[arg-type]
            clean_source="off" if archive_dir is None else "archive",
            archive_dir=archive_dir,
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
        """The files the record names, read as the stream reads them (archived ones there)."""
        files = [
            self._now_at(spark, name) or file_of_recorded_path(name)
            for name in _recorded_names(recorded)
        ]
        return read_files(spark, self, schema, files, rules)

    def missing(self, spark: SparkSession, recorded: Mapping[str, Any]) -> list[str]:
        """The recorded files that no longer exist, nor under the archive (checked on any store)."""
        names = _recorded_names(recorded)
        return [file_of_recorded_path(n) for n in names if self._now_at(spark, n) is None]

    def _now_at(self, spark: SparkSession, name: str) -> str | None:
        """Where a file the ledger names (`name` as recorded, URL-encoded) is now, as a path Spark
        takes: in place, else where `archive` moved it; None if it is in neither."""
        if exists(spark, recorded_location(name)):
            return file_of_recorded_path(name)
        if self.archive_dir is None:
            return None
        archived = archived_location(self.archive_dir, file_of_recorded_path(name))
        return archived if exists(spark, archived) else None

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


def validate_cleaning(path: str, clean_source: str, archive_dir: str | None) -> None:
    """Raise ConfigError unless `archive_dir` is set exactly for `archive` and lies apart.

    Spark keeps a moved file's whole path below the archive directory, so an archive and a
    landing directory inside one another could put archived files where the stream lists them
    (Spark refuses it when the stream starts, with a stack trace); one on another store cannot
    take a rename.
    """
    if clean_source not in get_args(CleanSource):
        raise ConfigError(
            f"clean_source must be one of {get_args(CleanSource)}, got {shorten(clean_source)}",
            key="clean_source",
        )
    if clean_source != "archive":
        if archive_dir is not None:
            raise ConfigError('archive_dir is only for clean_source = "archive"', key="archive_dir")
        return
    if archive_dir is None:
        raise ConfigError('clean_source = "archive" needs archive_dir', key="archive_dir")
    (landing_store, landing), (archive_store, archive) = _split(path), _split(archive_dir)
    if landing_store != archive_store:
        raise ConfigError(
            f"archive_dir {shorten(archive_dir)} is on another store than the landing directory "
            f"{shorten(path)}: files are archived by a rename",
            key="archive_dir",
        )
    inner, outer = PurePosixPath(archive or "/"), PurePosixPath(landing or "/")
    if inner == outer or outer in inner.parents or inner in outer.parents:
        raise ConfigError(
            f"archive_dir {shorten(archive_dir)} and the landing directory {shorten(path)} are "
            "one inside the other: archived files could be listed again (Spark refuses it)",
            key="archive_dir",
        )


def archived_location(archive_dir: str, file: str) -> str:
    """Where Spark's archiving puts `file`: its path (without scheme) below `archive_dir`."""
    return archive_dir.rstrip("/") + _split(file)[1]


def _split(location: str) -> tuple[str, str]:
    """A location's store (`scheme://authority`, `file:` and none alike) and its path.

    Not `urlsplit`: a decoded file name may hold `#` or `?`, which are part of its path here.
    """
    match = _STORE.match(location)
    if match is None:
        return "", location
    scheme, authority = match.group(1).lower(), match.group(2) or ""
    store = "" if scheme == "file" and not authority else f"{scheme}://{authority}"
    return store, location[match.end() :]


def _is_hidden(relative: str) -> bool:
    """True if a path below the landing directory has a part Spark's file source skips."""
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def recorded_files(recorded: Mapping[str, Any]) -> list[str]:
    """The files a batch's ledger record names, as paths (the record keeps them URL-encoded)."""
    return [file_of_recorded_path(name) for name in _recorded_names(recorded)]


def _recorded_names(recorded: Mapping[str, Any]) -> list[str]:
    """The files a batch's ledger record names, as recorded (URL-encoded URIs)."""
    files = recorded.get("files")
    return [str(f) for f in files] if isinstance(files, list) else []
