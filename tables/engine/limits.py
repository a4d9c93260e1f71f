"""What one analyst's statement may take: its time, and the rows it brings back.

`lakehouse sql` and the JDBC sessions of `lakehouse serve` run on JVMs other work shares (the
serve JVM serves every analyst): `range(1e12)` or a cross join would run until someone stops the
server. `[lakehouse.queries]` sets a statement timeout (default 5 minutes) and a cap on the rows
`sql` prints (default 1,000,000; its `--limit`, 1,000 by default, may not pass it). A statement past
its time is cancelled (by a tag on its jobs, in a classic session and over Spark Connect alike) and
reported in one line; a result cut at the cap says so on stderr, never silently. The JDBC server
cancels a statement past the same timeout (`spark.sql.thriftServer.queryTimeout`), and fails a
client's query whose result would pass the cap, in one line (`java/ResultRowCap.java`).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tables.engine.confs import QUERIES_MAX_ROWS_CONF
from tables.engine.jvm import is_classic
from tables.errors import ConfigError, QueryError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_TIMEOUT_SECONDS = 300.0
DEFAULT_MAX_ROWS = 1_000_000


class StatementTimeoutError(QueryError):
    """A statement ran past `[lakehouse.queries] timeout` and was interrupted."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the statement ran past its time limit of {seconds:g} s and was stopped "
            "([lakehouse.queries] timeout sets the limit)"
        )
        self.seconds = seconds


@dataclass(frozen=True)
class QueryLimits:
    """The statement timeout and the most rows `sql` prints."""

    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_rows: int = DEFAULT_MAX_ROWS

    def __post_init__(self) -> None:
        if not self.timeout_seconds > 0:
            raise ConfigError(f"timeout must be positive, got {self.timeout_seconds:g} s")
        if self.max_rows < 1:
            raise ConfigError(f"max_rows must be at least 1, got {self.max_rows}")

    def validate_limit(self, limit: int) -> None:
        """Raise ConfigError for a `--limit` above the cap."""
        if limit > self.max_rows:
            raise ConfigError(
                f"--limit {limit} is above the cap of {self.max_rows} rows "
                "([lakehouse.queries] max_rows)"
            )

    def jdbc_conf(self) -> dict[str, str]:
        """The JDBC server's settings: the timeout (cancel, and interrupt the tasks), and the
        row cap its parser wraps each client query in (`java/ResultRowCap.java`)."""
        return {
            "spark.sql.thriftServer.queryTimeout": f"{max(1, round(self.timeout_seconds))}s",
            "spark.sql.thriftServer.interruptOnCancel": "true",
            QUERIES_MAX_ROWS_CONF: str(self.max_rows),
        }


def collect_within(
    spark: SparkSession, frame: DataFrame, limit: int, timeout_seconds: float
) -> tuple[list[Any], bool]:
    """At most `limit` rows of `frame`, and whether there were more; interrupted after the
    timeout (StatementTimeoutError).

    The statement's jobs carry a tag of their own (a classic session's job tag, a Spark Connect
    operation's tag), which a watcher cancels once the time is up, and again each second until
    the statement returns (a job that starts after a cancel is not cancelled): the session's
    other work goes on.
    """
    tag = f"lakehouse-statement-{uuid.uuid4().hex}"
    tags = _Tags(spark)
    done = threading.Event()
    fired = threading.Event()

    def watch() -> None:
        if done.wait(timeout_seconds):
            return
        fired.set()
        while True:
            with contextlib.suppress(Exception):  # a session stopping meanwhile
                tags.cancel(tag)
            if done.wait(1.0):
                return

    watcher = threading.Thread(target=watch, name="lakehouse-statement-timeout", daemon=True)
    tags.add(tag)
    watcher.start()
    try:
        rows = frame.limit(limit + 1).collect()
    except Exception as exc:
        if fired.is_set():
            raise StatementTimeoutError(timeout_seconds) from exc
        raise
    finally:
        done.set()
        tags.remove(tag)
    return rows[:limit], len(rows) > limit


class _Tags:
    """Tag this thread's jobs and cancel them by tag, in a classic or a Spark Connect session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.classic = is_classic(spark)

    def add(self, tag: str) -> None:
        if self.classic:
            self.spark.sparkContext.addJobTag(tag)
        else:
            self.spark.addTag(tag)

    def remove(self, tag: str) -> None:
        if self.classic:
            self.spark.sparkContext.removeJobTag(tag)
        else:
            self.spark.removeTag(tag)

    def cancel(self, tag: str) -> None:
        if self.classic:
            self.spark.sparkContext.cancelJobsWithTag(tag)
        else:
            self.spark.interruptTag(tag)
