"""How an error raised in a Spark Connect worker's batch function reaches the driving process.

Over Spark Connect the batch function runs in a Python worker of the server; its error comes
back as the query's failure text, a Python traceback whose first line tells nothing. The worker
encodes the error as one line; this process finds it in the text and raises it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.config import PipelineSpec
from ingest.remote import RemoteBatch, decode_error, encode_error, worker_failure
from ingest.sources import FileSource
from ingest.stream_commit import MicroBatch
from tables.errors import (
    CommitConflictError,
    ConfigError,
    DuplicatesFoundError,
    LakehouseError,
    TerminalError,
    UnknownFieldsError,
    error_summary,
    raised_line,
)
from tables.spec import TableSpec

_TRACEBACK = (
    "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in "
    "foreach batch sink. Reason: Found error inside foreachBatch Python process: Traceback "
    '(most recent call last):\n  File "worker.py", line 1, in main\n'
    "RuntimeError: {line}\n\nJVM stacktrace:\n\tat org.apache.spark..."
)


def failure_text(exc: LakehouseError) -> str:
    """What Spark's query failure says when the worker's function raised `exc`'s line."""
    return _TRACEBACK.format(line=encode_error(exc))


@pytest.mark.parametrize("kind", [DuplicatesFoundError, CommitConflictError, TerminalError])
def test_a_project_error_comes_back_with_its_class_and_message(kind: type[LakehouseError]) -> None:
    decoded = decode_error(failure_text(kind("table t: key 'k' twice in batch 3")))
    assert type(decoded) is kind
    assert str(decoded) == "table t: key 'k' twice in batch 3"


def test_a_failure_without_an_encoded_line_decodes_to_none() -> None:
    assert decode_error("[STREAM_FAILED] Query terminated: the source's path vanished") is None


def test_an_error_comes_back_with_its_own_fields() -> None:
    raised = UnknownFieldsError(
        "file a.json: record event_id=e1: colour; table t has unknown_fields = fail",
        file="file:/landing/a.json",
        key="event_id=e1",
        fields=("colour", "size"),
    )
    decoded = decode_error(failure_text(raised))
    assert isinstance(decoded, UnknownFieldsError)
    assert (decoded.file, decoded.key, decoded.fields) == (raised.file, raised.key, raised.fields)
    assert str(decoded) == str(raised)
    config = decode_error(failure_text(ConfigError("bad window", key=("tables", "t", 0))))
    assert isinstance(config, ConfigError)
    assert (config.key, config.reason) == (("tables", "t", 0), "bad window")


def test_an_unknown_class_name_comes_back_as_a_terminal_error() -> None:
    decoded = decode_error('RuntimeError: LAKEHOUSE_ERROR[NoSuchError]: {"message": "it broke"}\n')
    assert type(decoded) is TerminalError
    assert str(decoded) == "it broke"


def test_a_transient_error_cut_short_keeps_its_class_so_its_exit_code_asks_for_a_retry() -> None:
    decoded = decode_error('RuntimeError: LAKEHOUSE_ERROR[CommitConflictError]: {"message": "con')
    assert type(decoded) is CommitConflictError
    assert str(decoded) == 'CommitConflictError: {"message": "con'


def test_a_line_cut_short_comes_back_as_a_terminal_error_with_what_arrived() -> None:
    decoded = decode_error('RuntimeError: LAKEHOUSE_ERROR[DuplicatesFoundError]: {"message": "tab')
    assert type(decoded) is TerminalError
    assert str(decoded) == 'DuplicatesFoundError: {"message": "tab'


class _Failing(RemoteBatch):
    """A batch function whose batch raises what a bug or an unmapped Spark error would."""

    def run(self, micro: MicroBatch) -> None:
        raise KeyError(f"no column for batch {micro.batch_id}")


def test_any_other_worker_error_travels_as_the_terminal_line_the_classic_runner_says(
    tmp_path: Path,
) -> None:
    spec = TableSpec("t_remote", "event_id string", ("event_id",))
    pipeline = PipelineSpec(
        name="orders",
        table=spec.name,
        app_id="orders",
        source=FileSource(str(tmp_path / "landing"), "json"),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    function = _Failing(pipeline, spec, batch_base=10, quality_dir=None, lease_seconds=30)
    with pytest.raises(RuntimeError) as raised:
        function(object(), 2)  # type: ignore[arg-type]
    assert raised.value.__cause__ is None
    decoded = decode_error(_TRACEBACK.format(line=str(raised.value)))
    assert type(decoded) is TerminalError
    assert str(decoded) == "stream orders failed: 'no column for batch 12'"
    assert str(decoded) == str(worker_failure("orders", KeyError("no column for batch 12")))


def test_a_traceback_in_the_failure_is_summed_up_by_its_exception_line() -> None:
    """Without an encoded line (a worker that died early), the summary names the error."""
    summary = error_summary(RuntimeError(_TRACEBACK.format(line="KeyError: 'event_id'")))
    assert summary.startswith("[FOREACH_BATCH_USER_FUNCTION_ERROR]")
    assert summary.endswith("Traceback (most recent call last): RuntimeError: KeyError: 'event_id'")
    assert raised_line("no traceback here") is None


def test_a_chained_traceback_is_summed_up_by_the_error_raised_last() -> None:
    text = (
        "Reason: Found error inside foreachBatch Python process: Traceback (most recent call "
        "last):\n  File \"a.py\", line 1, in f\nKeyError: 'k'\n\nDuring handling of the above "
        "exception, another exception occurred:\n\nTraceback (most recent call last):\n"
        '  File "a.py", line 3, in f\nValueError: bad batch\n\nJVM stacktrace:\nat x'
    )
    assert raised_line(text) == "ValueError: bad batch"
