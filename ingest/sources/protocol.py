"""What the runner, replay, the checks and the CLI ask of a source, whatever its kind.

`FileSource` (a landing directory) and `KafkaSource` (a topic) both satisfy `Source`, so callers
never branch on the source's type: the kind-specific parts (how a stream opens, what a batch's
ledger record holds, how a recorded batch is read again, what a restart from the log means)
live with each source. `recorded_source` picks the source that re-reads a batch from the record
its ledger entry holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ingest.sources.files import FileSource
from ingest.sources.kafka import KafkaSource
from tables.delta.ledger import recorded_offsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ingest.sources.backlog import Backlog
    from ingest.sources.resume import ResumePoint
    from tables.record_rules import RecordRules
    from tables.spec import TableSpec


class Source(Protocol):
    """A stream source: what it reads, how it reads it, and how it reads a batch again."""

    @property
    def kind(self) -> str:
        """The source kind the ledger records (`files`, `kafka`)."""

    @property
    def needs_kafka(self) -> bool:
        """True if the Spark session needs Spark's Kafka connector JARs."""

    @property
    def location(self) -> str | None:
        """The file-system location the source reads, if any (checked against other locations)."""

    @property
    def raw_format(self) -> str | None:
        """How the reader read the raw text (`json`, `csv`), so a quarantine reason names it."""

    @property
    def reader_options(self) -> Mapping[str, str]:
        """The reader's options that shape how raw text was parsed (for quarantine reasons)."""

    def describe(self) -> dict[str, Any]:
        """The source record stored in each batch's ledger entry (secrets redacted)."""

    def validate_table_columns(self, table: str, columns: Collection[str]) -> None:
        """Raise ConfigError if a table with these columns cannot hold the source's records."""

    def assert_present(self, spark: SparkSession) -> None:
        """Raise TerminalError, before a stream starts, if what the source reads is not there."""

    def resume_point(self, spark: SparkSession, spec: TableSpec, app_id: str) -> ResumePoint | None:
        """Where a stream with an empty checkpoint resumes from the table's log, if it can."""

    def open_stream(
        self,
        spark: SparkSession,
        schema: StructType,
        *,
        starting_offsets: str | None = None,
        rules: RecordRules | None = None,
    ) -> DataFrame:
        """The source as a stream of raw records; `stream_batch` parses each micro-batch.

        `rules` are the table's record rules (size limit, epoch unit).
        """

    def stream_batch(
        self, batch: DataFrame, spec: TableSpec, files: Sequence[str] | None = None
    ) -> AbstractContextManager[tuple[DataFrame, Mapping[str, Any]]]:
        """A raw micro-batch parsed for the table, and its ledger record, while the block runs.

        `open_stream` yields raw records; each batch is parsed here, on top of the raw batch
        (Spark hands foreachBatch the stream's whole plan as one opaque scan, which lists no
        input files: a file stream's `files` come from its checkpoint's source log).
        """

    def read_recorded(
        self,
        spark: SparkSession,
        schema: StructType,
        recorded: Mapping[str, Any],
        rules: RecordRules | None = None,
    ) -> DataFrame:
        """Read again, as one batch, exactly what a ledger record says a batch read."""

    def missing(self, spark: SparkSession, recorded: Mapping[str, Any]) -> list[str]:
        """What of a recorded batch the source no longer holds, one description each."""

    def backlog(self, spark: SparkSession, recorded: Sequence[Mapping[str, Any]]) -> Backlog:
        """What the source holds beyond the recorded batches (files, or offsets), if known."""


def recorded_source(recorded: Mapping[str, Any], configured: Source | None = None) -> Source | None:
    """The source that re-reads a batch from its ledger record, or None if it names nothing.

    The configured source is used when it is of the recorded kind: it carries the reader options
    and a Kafka source's credentials, which the ledger never holds. Otherwise the source is
    rebuilt from the record, with default options.
    """
    rebuild: Callable[[Mapping[str, Any]], Source]
    if recorded_offsets(recorded) is not None:
        kind, rebuild = "kafka", KafkaSource.from_record
    elif recorded.get("kind") == "files" and isinstance(recorded.get("files"), list):
        kind, rebuild = "files", FileSource.from_record
    else:
        return None
    if configured is not None and configured.kind == kind:
        return configured
    return rebuild(recorded)
