"""How a failed commit call is classified: transient (retry) or terminal (stop), without Spark.

The exceptions are the real classes the commit sees: delta-spark's Python conflict exceptions
and py4j's network error. `CommitConflictError` and `CommitOutcomeUnknownError` are transient,
so the commit re-reads its marker and retries; anything else stops with a terminal error.
"""

from __future__ import annotations

import delta.exceptions as delta_errors
import pytest
from py4j.protocol import Py4JNetworkError

from ingest.commit import error_kind_of
from tables.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    SchemaMismatchError,
    TerminalError,
)


@pytest.mark.parametrize(
    "conflict",
    [
        delta_errors.ConcurrentAppendException,
        delta_errors.ConcurrentDeleteReadException,
        delta_errors.ConcurrentDeleteDeleteException,
        delta_errors.ConcurrentTransactionException,
        delta_errors.ConcurrentWriteException,
        delta_errors.MetadataChangedException,
        delta_errors.ProtocolChangedException,
        delta_errors.DeltaConcurrentModificationException,
    ],
)
def test_a_concurrent_commit_is_a_transient_conflict(conflict: type[Exception]) -> None:
    error = error_kind_of(conflict("Files were added by a concurrent update.\nMore detail"))

    assert isinstance(error, CommitConflictError)
    assert error.kind == "transient"
    assert str(error) == "concurrent commit won: Files were added by a concurrent update."


@pytest.mark.parametrize(
    "lost",
    [Py4JNetworkError("Answer from Java side is empty"), ConnectionResetError("reset by peer")],
)
def test_a_lost_connection_leaves_the_outcome_unknown(lost: Exception) -> None:
    error = error_kind_of(lost)

    assert isinstance(error, CommitOutcomeUnknownError)
    assert error.kind == "transient"
    assert str(error).startswith("commit call failed: ")


def test_any_other_failure_is_terminal() -> None:
    error = error_kind_of(ValueError("DELTA_MERGE_UNRESOLVED_EXPRESSION"))

    assert type(error) is TerminalError
    assert error.kind == "terminal"
    assert "DELTA_MERGE_UNRESOLVED_EXPRESSION" in str(error)


def test_a_project_error_keeps_its_own_kind() -> None:
    mismatch = SchemaMismatchError("column amount is STRING, the table has DOUBLE")

    assert error_kind_of(mismatch) is mismatch
