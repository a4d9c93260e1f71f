"""Secret Spark settings reach a new JVM through a private file, never through its command line.

PySpark starts the driver JVM as `spark-submit --conf k=v ...`, and `lakehouse serve` starts the
Spark Connect server the same way: any local user reads those arguments (`ps`,
`/proc/PID/cmdline`). A setting whose name Spark itself would redact (the default
`spark.redaction.regex`: secret, password, token, access key), the metastore password or an S3
secret key, goes instead into a properties file only this user can read, given to spark-submit
with `--properties-file` (and `--load-spark-defaults`, so `spark-defaults.conf` still applies),
and removed once the JVM has read it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import IO

#: Spark's own default of `spark.redaction.regex`: the names it hides in its UI and logs.
SECRET_NAME = re.compile(r"(?i)secret|password|token|access[.]?key")
#: The environment variable PySpark reads its spark-submit arguments from.
SUBMIT_ARGS_ENV = "PYSPARK_SUBMIT_ARGS"
_SHELL = "pyspark-shell"
#: Characters a Java properties file reads as syntax (separators, comments, escapes, lines).
_ESCAPES = MappingProxyType(
    {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
    | {c: "\\" + c for c in "=:#! "}
)


def is_secret(key: str) -> bool:
    """True for a setting Spark would redact: it must not appear on a command line."""
    return SECRET_NAME.search(key) is not None


def split_secrets(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """`conf` as (settings that may go on a command line, secret settings)."""
    public = {k: v for k, v in conf.items() if not is_secret(k)}
    return public, {k: v for k, v in conf.items() if is_secret(k)}


def properties_text(settings: Mapping[str, str]) -> str:
    """`settings` as a Java properties file: every character that is syntax there escaped.

    Spark reads the file as UTF-8, so other characters go as they are.
    """
    lines = (f"{_escaped(key)}={_escaped(value)}\n" for key, value in settings.items())
    return "".join(lines)


def submit_options(properties: Path) -> list[str]:
    """The spark-submit options that load `properties` beside `spark-defaults.conf`."""
    return ["--properties-file", str(properties), "--load-spark-defaults"]


def submit_args(properties: Path, existing: str | None) -> str:
    """PySpark's submit arguments with `properties` loaded, before any the user set."""
    given = shlex.split(existing) if existing else [_SHELL]
    if not given or given[-1] != _SHELL:
        given.append(_SHELL)
    return shlex.join([*submit_options(properties), *given])


@contextlib.contextmanager
def secrets_file(settings: Mapping[str, str]) -> Iterator[Path | None]:
    """A properties file of `settings` readable by this user only, removed on leaving.

    Yields None when there is no secret to pass.
    """
    path = write_secrets_file(settings)
    try:
        yield path
    finally:
        if path is not None:
            path.unlink(missing_ok=True)


def write_secrets_file(settings: Mapping[str, str]) -> Path | None:
    """Write `settings` to a new properties file only this user can read; None if empty.

    The caller removes it once the JVM has read it.
    """
    if not settings:
        return None
    descriptor, name = tempfile.mkstemp(prefix="lakehouse-", suffix=".properties")
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # mkstemp: mode 0600
        handle.write(properties_text(settings))
    return Path(name)


@contextlib.contextmanager
def secrets_for_launch(settings: Mapping[str, str]) -> Iterator[None]:
    """While PySpark launches its JVM inside this block, it reads `settings` from a file.

    The submit arguments are this process's environment only for the launch; they come back
    as they were, and the file is removed, when the block ends.
    """
    with secrets_file(settings) as properties:
        if properties is None:
            yield
            return
        before = os.environ.get(SUBMIT_ARGS_ENV)
        os.environ[SUBMIT_ARGS_ENV] = submit_args(properties, before)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(SUBMIT_ARGS_ENV, None)
            else:
                os.environ[SUBMIT_ARGS_ENV] = before


def _escaped(text: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in text)


def redacted(line: bytes, secrets: Iterable[bytes]) -> bytes:
    """The line with every secret in it replaced by `<redacted>`."""
    for secret in secrets:
        if secret:
            line = line.replace(secret, b"<redacted>")
    return line


def copy_redacted(stream: IO[bytes], log: Path, secrets: Iterable[str]) -> threading.Thread:
    """Copy a child's output into `log`, each secret replaced, in a daemon thread; the thread.

    Spark prints some secrets it holds: the Python worker of a Connect `foreachBatch` prints its
    server URL with the server's token in it. A child whose output may carry one writes into a
    pipe read here, never into its log file directly.
    """
    hidden = [s.encode() for s in secrets if s]

    def copy() -> None:
        # The log is the operator's (0600); a write that fails (a full disk) drops the line and
        # the copy goes on draining the pipe: a full pipe would stop the child at its next write.
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with stream, os.fdopen(descriptor, "ab") as output:
            for line in iter(stream.readline, b""):
                with contextlib.suppress(OSError):
                    output.write(redacted(line, hidden))
                    output.flush()

    thread = threading.Thread(target=copy, name=f"log {log.name}", daemon=True)
    thread.start()
    return thread
