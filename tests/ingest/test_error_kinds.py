"""How a failed commit call is classified: transient (retry) or terminal (stop), without Spark.

The exceptions are the real classes the commit sees: delta-spark's Python conflict exceptions
and py4j's network error on a classic session, PySpark's Connect exceptions over Spark Connect.
`CommitConflictError` and `CommitOutcomeUnknownError` are transient, so the commit re-reads
its marker and retries; anything else stops with a terminal error.
"""

from __future__ import annotations

import delta.exceptions as delta_errors
import grpc
import pytest
from py4j.protocol import Py4JNetworkError
from pyspark.errors.exceptions.connect import SparkConnectGrpcException

from ingest.commit.merge import error_kind_of
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
    ("server_class", "condition"),
    [
        (
            "io.delta.exceptions.ConcurrentAppendException",
            "DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT",
        ),
        ("io.delta.exceptions.ConcurrentTransactionException", "DELTA_CONCURRENT_TRANSACTION"),
        ("io.delta.exceptions.MetadataChangedException", "DELTA_METADATA_CHANGED"),
    ],
)
def test_a_concurrent_commit_over_spark_connect_is_a_transient_conflict(
    server_class: str, condition: str
) -> None:
    message = f"({server_class}) [{condition}] Files were added by a concurrent update."
    error = error_kind_of(SparkConnectGrpcException(message=message, errorClass=condition))

    assert isinstance(error, CommitConflictError)
    assert error.kind == "transient"


def test_a_connect_server_out_of_reach_leaves_the_outcome_unknown() -> None:
    gone = SparkConnectGrpcException(
        message="failed to connect to all addresses", grpc_status_code=grpc.StatusCode.UNAVAILABLE
    )

    assert isinstance(error_kind_of(gone), CommitOutcomeUnknownError)


def test_another_connect_error_is_terminal() -> None:
    bad = SparkConnectGrpcException(
        message="(org.apache.spark.sql.AnalysisException) [UNRESOLVED_COLUMN] no column x",
        errorClass="UNRESOLVED_COLUMN",
    )

    assert type(error_kind_of(bad)) is TerminalError


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
