"""One error tree for the whole project, split into terminal and transient kinds.

A terminal error needs a person (bad config, a conflicting batch, a lost checkpoint): retrying
cannot help. A transient error may pass on retry (a concurrent commit, an unknown commit outcome).
Callers decide on `kind`, never on message text; the CLI maps the kind to an exit code.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

ErrorKind = Literal["terminal", "transient"]
#: A key inside a config document: `("tables", "events", "expectations", 0, "column")`.
KeyPath = tuple[str | int, ...]
_TRACEBACK = "Traceback (most recent call last):"
#: How a Py4JJavaError without a Spark error class begins (`... calling o78.sql.`).
_PY4J_CALL = "An error occurred while calling "
#: The start of the line Spark adds to an error to say how to fix it.
_HINT = re.compile(
    r"^(Please|Hint|Did you mean|Consider|To fix|To avoid|You (can|may|should|must)|Try|If you|"
    r"Set |Use |Remove |Change |Specify |Make sure|Check |Delete |Either )"
)


class LakehouseError(Exception):
    """Base of every error this project raises on purpose; its message is one line."""

    kind: ClassVar[ErrorKind] = "terminal"


class TerminalError(LakehouseError):
    """An error that retrying will not fix; an operator has to act."""

    kind: ClassVar[ErrorKind] = "terminal"


class TransientError(LakehouseError):
    """An error that may pass if the same step is tried again."""

    kind: ClassVar[ErrorKind] = "transient"


class ConfigError(TerminalError, ValueError):
    """The configuration file or an argument is invalid.

    `key` names the setting at fault relative to the object that refused it (`dedup_window` of
    a table spec, `options.mode` of a source) and `reason` is the message without its owner, so
    the config loader can restate it with the file and the full key path:
    `lakehouse.toml: tables.events.dedup_window: must be positive`.
    """

    def __init__(
        self, message: str, *, key: str | KeyPath | None = None, reason: str | None = None
    ) -> None:
        super().__init__(message)
        self.key: KeyPath | None = (key,) if isinstance(key, str) else key
        self.reason = message if reason is None else reason


class ConfigFileError(ConfigError):
    """A config error already located: its message starts with the file and the key path."""


class InvalidIdentifierError(ConfigError):
    """A table, column or app name is not a plain identifier and will not reach SQL."""


class SessionError(TerminalError):
    """Spark could not be started (no Java, Delta JARs unreachable, metastore locked)."""


class ClassicOnlyError(SessionError):
    """An operation with no public Spark or Delta API was asked of a Spark Connect session."""


class TableNotFoundError(TerminalError):
    """The named table is not in the catalog."""


class SchemaMismatchError(TerminalError):
    """An existing table's schema does not match its declared spec."""


class QueryError(TerminalError):
    """A SQL statement failed to parse or analyse."""


class BatchContentMismatchError(TerminalError):
    """A batch id already committed for an app id arrived again with different content."""


class CheckpointLostError(TerminalError):
    """The stream restarted at or below a batch the table already holds for its app id."""


class DamagedLogError(TerminalError):
    """A file of the table's Delta log cannot be read; the message names it."""


class ExpectationFailedError(TerminalError):
    """A batch broke an expectation whose action is `fail`: nothing of it was committed."""


class UnknownFieldsError(TerminalError):
    """A record held fields its table cannot hold as delivered, under `unknown_fields = "fail"`.

    Raised before anything of the batch is committed; carries where the first such record is.
    """

    def __init__(self, message: str, *, file: str | None, key: str, fields: tuple[str, ...]):
        super().__init__(message)
        self.file = file
        self.key = key
        self.fields = fields


class NewFieldsError(TerminalError):
    """A batch brought fields no column holds, under `schema_evolution = "fail"`; nothing of it
    was committed. Carries the fields, the table, the app id and the batch id."""

    def __init__(
        self, message: str, *, table: str, app_id: str, batch_id: int, fields: tuple[str, ...]
    ):
        super().__init__(message)
        self.table = table
        self.app_id = app_id
        self.batch_id = batch_id
        self.fields = fields


class DuplicatesFoundError(TerminalError):
    """The post-commit audit found record keys twice under a `fail` policy: the table is held."""


class ChangeFeedError(TerminalError):
    """A table's change data feed is off, or holds no changes for the versions asked."""


class CommitConflictError(TransientError):
    """Delta rejected the commit because a concurrent transaction won; retry after re-reading."""


class CommitOutcomeUnknownError(TransientError):
    """The commit call failed and re-reading the log could not tell whether it landed."""


class CommitNotWrittenError(TransientError):
    """The log store knows the commit file was not written (its PUT failed, no object is
    there): nothing was committed, and the batch may be tried again."""


class ReaderCrashedError(TransientError):
    """What read a batch died under it (the driver JVM, a Python worker): a record killed it.

    Transient: the next run narrows the batch and quarantines the record (`ingest.isolation`).
    Carries the pipeline, the batch id and the files the batch read (none for Kafka).
    """

    def __init__(self, message: str, *, pipeline: str, batch_id: int, files: tuple[str, ...]):
        super().__init__(message)
        self.pipeline = pipeline
        self.batch_id = batch_id
        self.files = files


class ClientGoneError(TransientError):
    """A stream run over `--remote` whose client stopped renewing its lease: the server's worker
    refuses the next batch, which stops the query (`ingest.remote_lease`). Transient: the next run
    goes on exactly once."""


class InjectedFaultError(TransientError):
    """Raised by a fault point switched on for a test; never raised in normal runs."""


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's text, for one-line error reports."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def error_summary(exc: BaseException, limit: int = 600) -> str:
    """The error's first line plus Spark's how-to-fix line where it has one, compact.

    Spark puts its hint (`Please either use a new checkpoint location, ...`) on the line after the
    error; plans and stack traces follow, and are dropped.
    """
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if len(lines) > 1 and lines[0].startswith(_PY4J_CALL):
        # py4j's own first line names the call (`o78.sql`); the Java exception is the next one
        lines = [lines[1].removeprefix(": "), *lines[2:]]
    kept = lines[:2] if len(lines) > 1 and _HINT.match(lines[1]) else lines[:1]
    if kept[0].endswith(_TRACEBACK):
        kept = [f"{kept[0]} {raised_line(text) or '(no exception line)'}"]
    text = " ".join(kept)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def raised_line(text: str) -> str | None:
    """The `Class: message` line that ends the Python traceback in `text`, if any.

    A Python worker's error (a batch function run by Spark) reaches the driver as Spark's error
    around the worker's traceback; its first line ends with the traceback's header, which
    tells nothing. The error raised is the last unindented line of the traceback (chained
    errors come before it), which ends where Spark's `JVM stacktrace:` starts.
    """
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines) if line.rstrip().endswith(_TRACEBACK)]
    if not starts:
        return None
    found = None
    for line in lines[starts[0] + 1 :]:
        if line.startswith("JVM stacktrace:"):
            break
        if line.strip() and not line[0].isspace() and not _CHAIN.match(line):
            found = line.strip()
    return found


_CHAIN = re.compile(rf"^({re.escape(_TRACEBACK)}|During handling of|The above exception)")
