"""A pipeline's stream run through a Spark Connect server.

Over Spark Connect the `foreachBatch` function runs in a Python worker the server starts for the
query (SPARK-44462), not in this process: it cannot touch this process's objects, only the
tables. So the function here (`RemoteBatch`) carries everything it needs (the pipeline, the
spec, the batch id base), commits and audits the batch in the worker exactly as the classic
runner does, and keeps its outcomes in a buffer of the worker's own. This process follows the
query's progress and reads each new batch's result back from the table's ledger, which is what
was committed anyway. A `LakehouseError` raised in the worker fails the query; its class and
message travel in the query's error (`encode_error`, `decode_error`) and are raised here again,
so the CLI says the same one line with the same exit code as on a classic session. Any other
error travels the same way, as the `TerminalError` the classic runner would make of it.

A stop (SIGINT, SIGTERM) waits for the batch under way to be checkpointed, then stops the query;
a batch Spark starts at that instant is interrupted, and the next run finishes it, exactly once,
as after a crash.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.checkpoint import last_committed_batch, remove_stopped_query_temp_files
from ingest.commit.batch_result import BatchResult, BatchStatus, result_from_entry
from ingest.maintenance import Upkeep
from ingest.outcomes import audit_after_commit, outcomes_of
from ingest.remote_lease import (
    REMOTE_LEASE_SECONDS_ENV,
    ClientLease,
    assert_client_present,
    remote_lease_seconds,
)
from ingest.sources.resume import read_batch_base
from ingest.stream_commit import MicroBatch, StreamTarget, commit_stream_batch
from ingest.triggers import start_query
from quality.check_results import CheckResult, ResultLog, audit_from_entry
from quality.expectations import ExpectationGate
from tables import errors
from tables.delta.history import read_ledger
from tables.delta.ledger import LedgerEntry
from tables.delta.writer import TableWriter
from tables.errors import LakehouseError, TerminalError, error_summary

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.config import PipelineSpec
    from ingest.stopping import StopRequest
    from tables.spec import TableSpec

_ERROR = re.compile(r"LAKEHOUSE_ERROR\[(\w+)\]: (.*?)(?:\n|$)")
_POLL_SECONDS = 1


def encode_error(exc: LakehouseError) -> str:
    """A worker's error as one line that survives the trip through the query's failure.

    The line carries the class, the message and the error's own fields (an unknown field's
    file and key), as JSON, so the error raised again here is the one the worker raised.
    """
    carried = {"message": str(exc), **vars(exc)}
    try:
        text = json.dumps(carried, default=str)
    except (TypeError, ValueError):
        text = json.dumps({"message": str(exc)})
    return f"LAKEHOUSE_ERROR[{type(exc).__name__}]: {text}"


def decode_error(text: str) -> LakehouseError | None:
    """The project error a failed query's message carries, rebuilt with its class; or None.

    A line cut short (Spark abbreviates long failure texts) gives what arrived: as its own
    class if that is transient (those carry no fields, and their exit code asks for a retry),
    else as a terminal error.
    """
    found = _ERROR.search(text)
    if found is None:
        return None
    named = getattr(errors, found.group(1), None)
    kind = named if isinstance(named, type) and issubclass(named, LakehouseError) else None
    try:
        carried = json.loads(found.group(2))
        message = str(carried.pop("message"))
    except (ValueError, TypeError, KeyError, AttributeError):
        arrived = f"{found.group(1)}: {found.group(2)}"
        return (
            kind(arrived)
            if kind is not None and kind.kind == "transient"
            else TerminalError(arrived)
        )
    if kind is None:
        return TerminalError(message)
    rebuilt = kind.__new__(kind)
    Exception.__init__(rebuilt, message)
    rebuilt.__dict__.update(
        {name: tuple(v) if isinstance(v, list) else v for name, v in carried.items()}
    )
    return rebuilt


def worker_failure(pipeline: str, exc: BaseException) -> TerminalError:
    """An unexpected error in the worker, as the one line the classic runner says of it.

    Left to Spark, it would reach this process as a Python traceback whose first line tells
    nothing (`Traceback (most recent call last):`).
    """
    return TerminalError(f"stream {pipeline} failed: {error_summary(exc)}")


class RemoteBatch:
    """The `foreachBatch` function of a stream run through Spark Connect (runs server-side).

    The worker deserializes it once and keeps it for the whole query, so what the classic runner
    keeps per run (the writer's caches, the expectation gate, the outcome buffer) it keeps on
    itself, made at its first batch.
    """

    def __init__(
        self,
        pipeline: PipelineSpec,
        spec: TableSpec,
        batch_base: int,
        quality_dir: Path | None,
        lease_seconds: float,
    ) -> None:
        self.pipeline, self.spec = pipeline, spec
        self.batch_base, self.quality_dir = batch_base, quality_dir
        self.lease_seconds = lease_seconds
        self._target: StreamTarget | None = None
        self._outcomes: ResultLog | None = None
        self._upkeep = Upkeep()

    def __getstate__(self) -> dict[str, Any]:
        """What travels to the server: the settings, never a session or a cache."""
        return {**self.__dict__, "_target": None, "_outcomes": None, "_upkeep": Upkeep()}

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Commit and audit one micro-batch; any error leaves as an encoded line.

        An unexpected error's traceback goes to the worker's stderr, the server's log.
        """
        try:
            self.run(MicroBatch(batch, batch_id, self.batch_base + batch_id))
        except LakehouseError as exc:
            raise RuntimeError(encode_error(exc)) from None
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            raise RuntimeError(encode_error(worker_failure(self.pipeline.name, exc))) from None

    def run(self, micro: MicroBatch) -> None:
        """What the classic runner does for a batch, with the worker's own writer and buffer;
        nothing once the client's lease has lapsed (`ingest.remote_lease`)."""
        spark = micro.rows.sparkSession
        pipeline = self.pipeline
        assert_client_present(
            spark, pipeline.name, pipeline.app_id, micro.batch_id, self.lease_seconds
        )
        if self._target is None or self._outcomes is None:
            gate = ExpectationGate(self.spec, self.quality_dir) if self.spec.expectations else None
            writer = TableWriter(spark, self.spec, self.pipeline.app_id)
            self._target = StreamTarget(self.pipeline, writer, gate)
            self._outcomes = outcomes_of(spark, self.spec, self.pipeline.app_id)
        result = commit_stream_batch(micro, self._target)
        writer = self._target.writer.on(spark)
        audit_after_commit(writer, result, self._outcomes)
        if result.status == "committed":  # the table's upkeep, if due, said in the server's log
            for upkeep in self._upkeep.after(writer, result.batch_id):
                print(f"lakehouse maintenance {upkeep.describe()}", file=sys.stderr, flush=True)


@dataclass
class Progress:
    """What this process has reported of a remote run: the newest Spark batch, and since when."""

    started: datetime
    reported: int = -1


@dataclass(frozen=True)
class RemoteStream:
    """A pipeline's stream to run through a Connect server, and where its results are told."""

    pipeline: PipelineSpec
    spec: TableSpec
    quality_dir: Path | None
    on_result: Callable[[BatchResult, list[CheckResult]], None]

    def run(
        self,
        spark: SparkSession,
        stream: DataFrame,
        trigger_args: Mapping[str, Any],
        stop: StopRequest,
    ) -> None:
        """Run the stream through the Connect server until it ends, fails, or a stop arrives."""
        pipeline = self.pipeline
        batch_base = read_batch_base(spark, pipeline.checkpoint)
        # Spark may report the checkpoint's last batch again before any new one runs: only
        # batches above it are this run's to report.
        progress = Progress(datetime.now(), last_committed_batch(spark, pipeline.checkpoint))
        seconds = remote_lease_seconds(os.environ.get(REMOTE_LEASE_SECONDS_ENV))
        handler = RemoteBatch(pipeline, self.spec, batch_base, self.quality_dir, seconds)
        with ClientLease(spark, pipeline.app_id, seconds):
            query = start_query(stream, pipeline.app_id, pipeline.checkpoint, trigger_args, handler)
            try:
                while not query.awaitTermination(_POLL_SECONDS):
                    self._report(spark, batch_base, query, progress)
                    if stop.requested:
                        _stop_when_idle(query)
                        if not query.isActive:
                            remove_stopped_query_temp_files(spark, pipeline.checkpoint)
                        break
            except Exception as exc:
                decoded = decode_error(str(exc))
                if decoded is not None:
                    raise decoded from exc
                raise TerminalError(f"stream {pipeline.name} failed: {error_summary(exc)}") from exc
            finally:
                self._report(spark, batch_base, query, progress)

    def _report(self, spark: SparkSession, batch_base: int, query: Any, progress: Progress) -> None:
        """Report the batches the query finished since the last call, read from the ledger."""
        newest = _newest_batch(query)
        if newest is None or newest <= progress.reported:
            return
        wanted = range(batch_base + progress.reported + 1, batch_base + newest + 1)
        entries = _entries(spark, self.spec.name, self.pipeline.app_id, set(wanted))
        for batch_id in wanted:
            entry = entries.get(batch_id)
            if entry is None:
                continue
            self.on_result(*remote_result(entry, self.spec, progress.started))
        progress.reported = newest


def _stop_when_idle(query: Any) -> None:
    """Stop the query once no trigger is running (the batch under way has been checkpointed)."""
    deadline = time.monotonic() + 60.0
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive", False):
            break
        time.sleep(0.2)
    query.stop()


def _newest_batch(query: Any) -> int | None:
    """The newest Spark batch id the query has finished, from its progress reports."""
    done = [int(getattr(p, "batchId", None) or p["batchId"]) for p in query.recentProgress]
    return max(done) if done else None


def _entries(
    spark: SparkSession, table: str, app_id: str, wanted: set[int]
) -> dict[int, LedgerEntry]:
    found: dict[int, LedgerEntry] = {}
    for entry in read_ledger(spark, table, app_id=app_id, limit=len(wanted) * 4 + 16):
        if entry.meta.kind == "batch" and entry.meta.batch_id in wanted:
            found.setdefault(entry.meta.batch_id, entry)
    return found


def remote_result(
    entry: LedgerEntry, spec: TableSpec, started: datetime
) -> tuple[BatchResult, list[CheckResult]]:
    """A batch's result as the ledger shows it: committed by this run, or skipped as earlier."""
    ours = entry.committed_at >= started.replace(microsecond=0)
    status: BatchStatus = "committed" if entry.meta.rows_read else "empty"
    if not ours:
        status = "skipped"
    note = "" if ours else "already committed by an earlier run"
    result = result_from_entry(entry, spec.name, status=status, attempts=1, note=note)
    if not ours or entry.meta.audit is None:
        return result, []
    audit = audit_from_entry(
        spec.name,
        entry.meta.app_id,
        entry.meta.batch_id,
        entry.version,
        entry.meta.audit,
        spec.audit_policy,
    )
    return result, [audit]
