"""A batch that crashed its reader is narrowed to the record that crashed it, before it commits.

A record can kill what reads it: the Python worker (an exit, a segfault in a library) or the
driver JVM itself (a stack overflow, an out-of-memory error in a task). The batch then fails at
every restart: one record stops the pipeline for good. So a run that finds its checkpoint
interrupted on a batch the table does not hold (Spark wrote the batch's offsets, not its commit)
narrows that batch before committing it:

1. the whole batch is classified on its own first (a trial: nothing is written), and if that
   passes the batch commits as usual (a restart after a plain kill costs one job);
2. a piece that crashes is split: by files, then by the hash of the record text, until a piece
   holds one record (or one file, for CSV, which is split per file);
3. that record is the culprit: it is quarantined with `crashed the reader: <cause>` and the
   rest of the batch commits, under the same batch id, exactly once.

The narrowing's state (`<checkpoint>/lakehouse/isolation.json`) is written before each trial,
so a trial that kills the JVM is known to the next run as the piece that crashed. The culprits
are recorded in the batch's ledger entry (`source.isolated`), so a re-read of the batch (a replay,
a re-run verified by hash) leaves them out the same way. The decisions are pure functions of
the state; `BatchIsolation` carries them out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    MAGIC_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    SOURCE_FILE_COLUMN,
)
from tables.engine.confs import HOME_CONF
from tables.engine.jvm import is_jvm_lost
from tables.engine.storage import delete, local_path, read_bytes, write_bytes
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STATE_FILE = "lakehouse/isolation.json"
#: The source record's key for the culprits of a batch, in its ledger entry.
ISOLATED_KEY = "isolated"
_LOW, _HIGH = -(2**63), 2**63


@dataclass(frozen=True)
class Piece:
    """A part of a batch: some of its files (None: all), records whose text hash is in [lo, hi)."""

    files: tuple[str, ...] | None = None
    lo: int = _LOW
    hi: int = _HIGH

    def as_json(self) -> dict[str, Any]:
        return {
            "files": None if self.files is None else list(self.files),
            "lo": self.lo,
            "hi": self.hi,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Piece:
        files = data.get("files")
        return cls(None if files is None else tuple(files), int(data["lo"]), int(data["hi"]))


@dataclass(frozen=True)
class Culprit:
    """A record that crashed the reader: its file (None: Kafka) and text hash (None: the file)."""

    file: str | None
    record_hash: int | None
    cause: str

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, "hash": self.record_hash, "cause": self.cause}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Culprit:
        found = data.get("hash")
        return cls(data.get("file"), None if found is None else int(found), str(data["cause"]))

    @property
    def reason(self) -> str:
        """Its quarantine reason."""
        return f"crashed the reader: {self.cause}"


@dataclass(frozen=True)
class IsolationState:
    """Where the narrowing of one batch stands: pieces to try, the one on trial, culprits."""

    batch_id: int
    pending: tuple[Piece, ...] = (Piece(),)
    trying: Piece | None = None
    culprits: tuple[Culprit, ...] = field(default_factory=tuple)

    def as_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "pending": [p.as_json() for p in self.pending],
            "trying": None if self.trying is None else self.trying.as_json(),
            "culprits": [c.as_json() for c in self.culprits],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IsolationState:
        trying = data.get("trying")
        return cls(
            batch_id=int(data["batch_id"]),
            pending=tuple(Piece.from_json(p) for p in data.get("pending", [])),
            trying=None if trying is None else Piece.from_json(trying),
            culprits=tuple(Culprit.from_json(c) for c in data.get("culprits", [])),
        )

    @property
    def is_done(self) -> bool:
        """True when every piece has been tried."""
        return not self.pending and self.trying is None


def is_interrupted(
    last_offsets: int | None, last_commit: int, committed: int | None, batch_base: int
) -> bool:
    """True if the checkpoint's newest batch was begun and neither checkpointed nor committed.

    Spark writes a batch's offsets before running it and its commit after: offsets without a
    commit mean the run ended inside the batch. If the table's marker holds the batch, it
    committed and only the checkpoint was cut short: nothing to narrow.
    """
    if last_offsets is None or last_offsets <= last_commit:
        return False
    return committed is None or committed < batch_base + last_offsets


def split(piece: Piece, files: Sequence[str], records: int) -> tuple[Piece, ...] | None:
    """Two halves of a piece that crashed, or None if it is one record (or one unsplittable file).

    `files` are the files the piece covers and `records` how many distinct record texts it
    holds. Files are halved first, then the hash range; a piece of one record text is whole.
    """
    if len(files) > 1:
        middle = len(files) // 2
        return (
            replace(piece, files=tuple(files[:middle])),
            replace(piece, files=tuple(files[middle:])),
        )
    if records <= 1 or piece.hi - piece.lo <= 1:
        return None
    middle = piece.lo + (piece.hi - piece.lo) // 2
    only = tuple(files) if files else piece.files
    return (
        Piece(only, piece.lo, middle),
        Piece(only, middle, piece.hi),
    )


def after_crash(
    state: IsolationState, files: Sequence[str], records: int, hashes: Sequence[int], cause: str
) -> IsolationState:
    """The state once the piece on trial crashed: split into pending halves, or a culprit.

    `hashes` are the record hashes of a piece that cannot be split (one record text: one hash;
    a file the split cannot look into: none, the whole file is the culprit).
    """
    assert state.trying is not None
    halves = split(state.trying, files, records)
    if halves is not None:
        return replace(state, trying=None, pending=(*halves, *state.pending))
    file = files[0] if len(files) == 1 else None
    found = [Culprit(file, h, cause) for h in hashes] or [Culprit(file, None, cause)]
    return replace(state, trying=None, culprits=(*state.culprits, *found))


def piece_filter(piece: Piece, hashed: Column) -> Column:
    """The rows of a batch a piece covers (its files, its hash range)."""
    condition = (hashed >= F.lit(piece.lo)) if piece.lo > _LOW else F.lit(True)
    if piece.hi < _HIGH:
        condition = condition & (hashed < F.lit(piece.hi))
    if piece.files is not None:
        condition = condition & F.col(SOURCE_FILE_COLUMN).isin(list(piece.files))
    return condition


def record_hash() -> Column:
    """The hash of a row's record text: found without parsing it."""
    return F.xxhash64(F.col(RECORD_COLUMN))


def without_culprits(
    spark: SparkSession, batch: DataFrame, data: Sequence[str], culprits: Sequence[Culprit]
) -> DataFrame:
    """The batch with each culprit's rows replaced by one that carries its reason.

    `data` are the table's columns in the batch. A culprit record's row is read for its text
    alone (no parse, no Python); a culprit file (record hash None) is one row that names it,
    as an undecodable file is, and none of its rows is read.
    """
    if not culprits:
        return batch
    by_record = [c for c in culprits if c.record_hash is not None]
    by_file = [c for c in culprits if c.record_hash is None]
    hashed = record_hash()
    hit: Column = F.lit(False)
    reason: Column = F.lit(None).cast("string")
    for culprit in by_record:
        match = hashed == F.lit(culprit.record_hash)
        if culprit.file is not None:
            match = match & (F.col(SOURCE_FILE_COLUMN) == F.lit(culprit.file))
        hit = hit | match
        reason = F.when(match, F.lit(culprit.reason)).otherwise(reason)
    for culprit in by_file:
        hit = hit | (F.col(SOURCE_FILE_COLUMN) == F.lit(culprit.file))
    kept = batch.where(~hit)
    types = {f.name: f.dataType for f in batch.schema.fields}
    cleared = {*data, RESCUE_INPUT_COLUMN, MAGIC_COLUMN, RESCUED_COLUMN}

    def column(name: str, text: Column, fault: Column) -> Column:
        if name in cleared:
            return F.lit(None).cast(types[name]).alias(name)
        if name == CORRUPT_COLUMN:
            return text.alias(name)
        if name == FAULT_COLUMN:
            return fault.alias(name)
        return F.col(name)

    crashed = batch.where(hit & F.lit(bool(by_record))).select(
        *[column(c, F.col(RECORD_COLUMN), reason) for c in batch.columns]
    )
    files = spark.createDataFrame(
        [
            tuple(
                c.file if n == SOURCE_FILE_COLUMN else c.reason if n == FAULT_COLUMN else None
                for n in batch.columns
            )
            for c in by_file
        ],
        batch.schema,
    )
    return kept.unionByName(crashed).unionByName(files)


def recorded_culprits(source: Mapping[str, Any] | None) -> tuple[Culprit, ...]:
    """The culprits a batch's ledger source record names (none for most batches)."""
    found = (source or {}).get(ISOLATED_KEY)
    return tuple(Culprit.from_json(c) for c in found) if isinstance(found, list) else ()


def with_culprits(record: Mapping[str, Any], culprits: Sequence[Culprit]) -> dict[str, Any]:
    """A source record naming the culprits left out of its batch."""
    if not culprits:
        return dict(record)
    return {**record, ISOLATED_KEY: [c.as_json() for c in culprits]}


#: The line after which the driver log names the error that ended an executor's thread.
_UNCAUGHT = "Uncaught exception in thread"
_LOG_TAIL_BYTES = 1 << 20


def lost_cause(spark: SparkSession) -> str:
    """The cause given to a piece whose trial ended the process: the driver JVM was lost.

    The embedded driver's log (`<home>/logs/spark-driver.log`) names the error that ended it
    (`java.lang.StackOverflowError`) when an executor thread died of one; it is added if found.
    """
    said = "the Spark driver JVM was lost"
    home = spark.conf.get(HOME_CONF, None)
    local = local_path(f"{home}/logs/spark-driver.log") if home else None
    if local is None or not local.is_file():
        return said
    with local.open("rb") as log:
        log.seek(max(0, local.stat().st_size - _LOG_TAIL_BYTES))
        tail = log.read().decode("utf-8", "replace").splitlines()
    marks = [n for n, line in enumerate(tail) if _UNCAUGHT in line]
    if not marks or marks[-1] + 1 >= len(tail):
        return said
    error = tail[marks[-1] + 1].split(":", 1)[0].strip()
    return f"{said} ({error})" if error.startswith("java.") else said


def state_location(checkpoint: str) -> str:
    """Where a checkpoint's narrowing state is kept."""
    return f"{checkpoint.rstrip('/')}/{STATE_FILE}"


def load_state(spark: SparkSession, checkpoint: str) -> IsolationState | None:
    """The narrowing state a run left, if any."""
    data = read_bytes(spark, state_location(checkpoint))
    return None if data is None else IsolationState.from_json(json.loads(data))


def save_state(spark: SparkSession, checkpoint: str, state: IsolationState) -> None:
    """Keep the narrowing state before the next trial (a trial may end the process)."""
    write_bytes(spark, state_location(checkpoint), json.dumps(state.as_json()).encode())


def clear_state(spark: SparkSession, checkpoint: str) -> None:
    """Forget the narrowing once its batch has committed."""
    delete(spark, state_location(checkpoint))


Trial = Callable[["DataFrame"], None]
#: Text a crash of the reader leaves in the error of the job it ended, and what it is called.
_CAUSES = (
    ("Python worker exited unexpectedly", "the Python worker exited unexpectedly"),
    ("StackOverflowError", "java.lang.StackOverflowError"),
    ("OutOfMemoryError", "java.lang.OutOfMemoryError"),
    ("ExecutorLostFailure", "the executor was lost"),
)


def is_reader_crash(exc: BaseException) -> bool:
    """True if a job's error says its reader crashed (a worker or executor died under a record).

    Spark reports these as a task's failure text, with no error condition of their own.
    """
    text = str(exc)
    return any(marker in text for marker, _ in _CAUSES)


def crash_cause(exc: BaseException) -> str:
    """A crash's cause in a few words, for its quarantine reason."""
    text = str(exc)
    return next((said for marker, said in _CAUSES if marker in text), type(exc).__name__)


class BatchIsolation:
    """The narrowing of one interrupted batch of a run, carried out before its commit.

    A trial classifies a piece as the commit would (parse, rescue, checks) and writes nothing.
    `by_record` off (CSV, whose file is split in one Python call) stops the split at a file.
    `lost` is the cause given to a piece whose trial ended the process before.
    """

    def __init__(self, spark: SparkSession, checkpoint: str, batch_id: int, lost: str) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.batch_id = batch_id
        self.lost = lost
        kept = load_state(spark, checkpoint)
        same = kept is not None and kept.batch_id == batch_id
        self.state: IsolationState = kept if kept is not None and same else IsolationState(batch_id)

    def culprits(
        self, batch: DataFrame, trial: Trial, files: Sequence[str], *, by_record: bool
    ) -> tuple[Culprit, ...]:
        """Try the pending pieces of the batch until each passed or is a culprit.

        `files` are the batch's files as its rows name them (none for Kafka). An error of a
        trial that is not a crash is the batch's own: the narrowing is dropped (the next run
        begins it again) and the error raised.
        """
        if self.state.trying is not None:
            self._crashed(batch, files, self.lost, by_record)
        while self.state.pending:
            piece, *rest = self.state.pending
            self.state = replace(self.state, pending=tuple(rest), trying=piece)
            save_state(self.spark, self.checkpoint, self.state)
            try:
                trial(batch.where(piece_filter(piece, record_hash())))
            except Exception as exc:
                if is_jvm_lost(exc):  # the piece on trial stays: the next run splits it
                    raise
                if not is_reader_crash(exc):
                    clear_state(self.spark, self.checkpoint)
                    raise
                self._crashed(batch, files, crash_cause(exc), by_record)
            else:
                self.state = replace(self.state, trying=None)
                save_state(self.spark, self.checkpoint, self.state)
        return self.state.culprits

    def _crashed(self, batch: DataFrame, files: Sequence[str], cause: str, by_record: bool) -> None:
        """Split the piece on trial, or name its record (its file) a culprit."""
        piece = self.state.trying
        assert piece is not None
        covered = [f for f in files if piece.files is None or f in piece.files]
        hashes: list[int] = []
        records = 1
        if by_record and len(covered) <= 1:
            rows = batch.where(piece_filter(piece, record_hash()))
            found = rows.select(record_hash().alias("h")).distinct().limit(2).collect()
            hashes = [int(r["h"]) for r in found]
            records = len(hashes)
        self.state = after_crash(self.state, covered, records, hashes, cause)
        save_state(self.spark, self.checkpoint, self.state)

    def done(self) -> None:
        """The batch committed: the narrowing is over."""
        clear_state(self.spark, self.checkpoint)
