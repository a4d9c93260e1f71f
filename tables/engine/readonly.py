"""The read-only guard shared by `lakehouse sql` and `lakehouse serve`: one rule, in the JVM.

`lakehouse sql` and the JDBC endpoint run only statements whose analysed plan reads (queries,
SHOW, DESCRIBE, EXPLAIN); the rule that decides is a Spark check rule
(`tables/engine/java/ReadOnlyGuard.java`), because the JDBC server's statements never pass through
Python. It judges Spark's own plan, never the statement's text. The class is compiled with the
project's other JVM classes (`tables.engine.java_classes`), and every embedded session loads it as a
SQL extension that does nothing until a session is marked read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tables.engine.clones import clone_session
from tables.engine.confs import GUARD_EXTENSION, READ_ONLY_CONF, VARIABLE_SUBSTITUTION_CONF
from tables.errors import QueryError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REFUSAL_PREFIX = "LAKEHOUSE_READ_ONLY: "


def read_only_session(spark: SparkSession) -> SparkSession:
    """A clone of the session (same catalog and tables) in which only reading statements run."""

    session = clone_session(spark)
    session.conf.set(READ_ONLY_CONF, "true")
    # `${env:X}`, `${system:y}` and `${conf}` in a statement stay text (SET is refused after)
    session.conf.set(VARIABLE_SUBSTITUTION_CONF, "false")
    return session


def refusal(exc: BaseException) -> str | None:
    """The guard's one-line refusal inside a Spark error or its JVM causes, if it is there."""
    texts = [str(exc)]
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    for _ in range(8):
        if java is None:
            break
        texts.append(str(java.toString()))
        java = java.getCause()
    for text in texts:
        start = text.find(REFUSAL_PREFIX)
        if start >= 0:
            return text[start + len(REFUSAL_PREFIX) :].splitlines()[0].strip()
    return None


def is_guarded(spark: SparkSession) -> bool:
    """True if the session loaded the guard (a session lakehouse did not start has none)."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    return GUARD_EXTENSION in extensions


def run_statement(
    spark: SparkSession,
    query: str,
    *,
    allow_writes: bool,
    confirm: Callable[[str], object] | None,
) -> DataFrame:
    """Run a statement read-only; a refused one runs only when writes are allowed and confirmed.

    `confirm` asks the question and aborts on no (None: the answer is yes). A session this
    project did not start has no guard: it runs statements only with writes allowed.
    """
    if not is_guarded(spark):
        if not allow_writes:
            raise QueryError(
                "this Spark session was not started by lakehouse, so it has no read-only guard: "
                "pass --allow-writes to run statements on it as they are"
            )
        if confirm is not None:
            confirm("This session has no read-only guard. Run the statement?")
        return spark.sql(query)
    try:
        return read_only_session(spark).sql(query)
    except Exception as exc:
        reason = refusal(exc)
        if reason is None:
            raise
        if not allow_writes:
            raise QueryError(
                f"refused: {reason}; `lakehouse sql` runs queries, SHOW, DESCRIBE and EXPLAIN "
                "(--allow-writes runs anything, after a confirmation)"
            ) from None
    if confirm is not None:
        confirm(f"This statement is not read-only ({reason}). Run it?")
    return spark.sql(query)
