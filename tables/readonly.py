"""The read-only guard shared by `lakehouse sql` and `lakehouse serve`: one rule, in the JVM.

`lakehouse sql` and the JDBC endpoint run only statements whose analysed plan reads (queries,
SHOW, DESCRIBE, EXPLAIN); the rule that decides is a Spark check rule
(`tables/java/ReadOnlyGuard.java`), because the JDBC server's statements never pass through
Python. It judges Spark's own plan, never the statement's text. The class is compiled once with
the JDK's `javac` against PySpark's JARs into the JAR cache, and every embedded session loads it
as a SQL extension that does nothing until a session is marked read-only.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tables.connectors import cache_root, locked
from tables.errors import QueryError, SessionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GUARD_EXTENSION = "lakehouse.ReadOnlyGuard"
READ_ONLY_CONF = "spark.lakehouse.readOnly"
SERVER_READ_ONLY_CONF = "spark.lakehouse.server.readOnly"
HOME_CONF = "spark.lakehouse.home"
REFUSAL_PREFIX = "LAKEHOUSE_READ_ONLY: "
_SOURCE = Path(__file__).with_name("java") / "ReadOnlyGuard.java"


def guard_jar() -> Path:
    """The compiled guard's JAR, built on first use and cached by its source and Spark's version."""
    import pyspark

    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source + pyspark.__version__.encode()).hexdigest()[:16]
    target = cache_root() / f"read-only-guard-{digest}"
    jar = target / "read-only-guard.jar"
    if jar.is_file():
        return jar
    target.mkdir(parents=True, exist_ok=True)
    with locked(target / ".lock"):
        if not jar.is_file():
            _compile(jar)
    return jar


def _compile(jar: Path) -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise SessionError(
            "javac not found: the read-only guard of `lakehouse sql` and `lakehouse serve` is "
            "compiled once with a JDK 17's javac; install a JDK (not only a JRE)"
        )
    import pyspark

    classpath = str(Path(pyspark.__file__).parent / "jars" / "*")
    with tempfile.TemporaryDirectory(prefix="lakehouse-guard-") as build:
        done = subprocess.run(
            [javac, "--release", "17", "-cp", classpath, "-d", build, str(_SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SessionError(f"javac could not build the read-only guard: {done.stderr[:300]}")
        staging = jar.with_suffix(".partial")
        with zipfile.ZipFile(staging, "w") as archive:
            for path in sorted(Path(build).rglob("*.class")):
                archive.write(path, path.relative_to(build).as_posix())
        staging.replace(jar)


def read_only_session(spark: SparkSession) -> SparkSession:
    """A clone of the session (same catalog and tables) in which only reading statements run."""
    from tables.clones import clone_session

    session = clone_session(spark)
    session.conf.set(READ_ONLY_CONF, "true")
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
