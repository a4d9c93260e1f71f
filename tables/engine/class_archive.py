"""The driver JVM's class archive: a later embedded session starts seconds sooner.

A new Spark driver spends much of its first seconds loading, parsing and verifying the same
Spark, Delta and Hadoop classes as the last one did. Java's dynamic AppCDS keeps them: a JVM
started with `-XX:ArchiveClassesAtExit` writes the classes it loaded into an archive when it
exits, and a later JVM started with `-XX:SharedArchiveFile` maps that archive instead. The JVM
checks the archive against its own build and class path and runs without it when they differ,
so a stale archive costs its disk space and nothing else.

One archive per Java and class path (`archive_key`), in the JAR cache. The first process that
finds none and takes its lock writes it: its JVM writes under a name of its own, and at this
process's exit the process waits for its JVM to finish and moves the archive into place. The lock
is an `flock` held until then, as a checkpoint's is (`ingest.checkpoint`): the kernel drops it
with a killed writer, and the next start takes over and removes the partial file it left. A JVM that
exits cleanly without writing one (a Java without its base archive) is not asked again for a
day. `LAKEHOUSE_CLASS_ARCHIVE=off` leaves the JVM's options alone; `use` maps an archive that is
there and never writes one (a CI job or a shared cache that writes its archive once, up front).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import pyspark

ARCHIVE_ENV = "LAKEHOUSE_CLASS_ARCHIVE"
#: How long a process waits at exit for its JVM to write the archive (about 20 s on 2 cores).
WRITE_WAIT_SECONDS = 180.0
#: How long it lets Spark stop before letting the JVM go regardless.
STOP_WAIT_SECONDS = 30.0
#: How long a Java that could not write an archive is left alone, and partial archives of other
#: class paths are kept.
RETRY_SECONDS = 24 * 3600.0
#: Archives of other class paths unused for this long are removed when a new one is written.
UNUSED_DAYS = 30

#: The archive carries checksums of its regions, checked when mapped: a damaged file is refused.
_VERIFY = "-XX:+VerifySharedSpaces"
#: What else shapes the driver JVM's class path and options, so goes into the key. Not
#: JAVA_TOOL_OPTIONS: it applies to every JVM and mostly carries logging and agents.
_JVM_ENV = ("SPARK_CONF_DIR", "SPARK_SUBMIT_OPTS")
#: The JVM's own files an archive is tied to (the base archive is regenerated on some installs).
_JVM_FILES = ("lib/server/libjvm.so", "lib/server/classes.jsa", "lib/modules")

ArchiveMode = Literal["use", "write", "none"]
#: What `LAKEHOUSE_CLASS_ARCHIVE` asks for: map or write (default), map only, nothing.
ArchiveSetting = Literal["on", "use", "off"]


@dataclass(frozen=True)
class ArchivePlan:
    """The JVM options for one start, and where a written archive goes at exit."""

    mode: ArchiveMode
    options: tuple[str, ...] = ()
    archive: Path | None = None
    partial: Path | None = None
    lock: IO[str] | None = field(default=None, compare=False)


def archive_setting(environ: Mapping[str, str]) -> ArchiveSetting:
    """`LAKEHOUSE_CLASS_ARCHIVE`: `off` (or 0, false, no), `use` (map only), else `on`."""
    value = environ.get(ARCHIVE_ENV, "on").strip().lower()
    if value in {"off", "0", "false", "no"}:
        return "off"
    return "use" if value == "use" else "on"


def is_enabled(environ: Mapping[str, str]) -> bool:
    """True unless `LAKEHOUSE_CLASS_ARCHIVE` turns the archive off."""
    return archive_setting(environ) != "off"


def archive_key(java: str, class_path: Iterable[str], java_options: str) -> str:
    """A name for the archive of one Java build, class path and set of JVM options.

    Any change to them makes a new archive, instead of one the JVM would refuse every time.
    """
    digest = hashlib.sha256(java.encode())
    for entry in (*class_path, java_options):
        digest.update(b"\0" + entry.encode())
    return digest.hexdigest()[:20]


def should_remove(age_days: float) -> bool:
    """True for another class path's archive no start has used for `UNUSED_DAYS`."""
    return age_days > UNUSED_DAYS


def plan_archive(cache: Path, key: str, pid: int, *, may_write: bool = True) -> ArchivePlan:
    """Use the archive of `key` if there is one; else write it if no live process is writing it.

    Each use touches the archive, so the archives still in use can be told from stale ones, and
    removes the key's partial files (a killed writer's JVM writes one as it exits, later).
    """
    archive = cache / f"classes-{key}.jsa"
    if any(c.isspace() for c in str(archive)):  # Spark splits the JVM's options on whitespace
        return ArchivePlan("none")
    if archive.is_file():
        with contextlib.suppress(OSError):
            os.utime(archive)
        _remove_partials(archive)  # a killed writer's JVM may have written one since
        mapped = (f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", _VERIFY)
        return ArchivePlan("use", mapped, archive)
    if not may_write or _is_recent(archive.with_suffix(".failed")):
        return ArchivePlan("none")
    cache.mkdir(parents=True, exist_ok=True)
    lock = _locked(archive.with_suffix(".lock"))
    if lock is None:  # another process is writing it
        return ArchivePlan("none")
    _remove_partials(archive)  # by writers that are gone
    partial = archive.with_suffix(f".{pid}.partial")
    written = (f"-XX:ArchiveClassesAtExit={partial}", _VERIFY)
    return ArchivePlan("write", written, archive, partial, lock)


def with_class_archive(
    conf: Mapping[str, str], environ: Mapping[str, str], cache: Path
) -> tuple[dict[str, str], ArchivePlan]:
    """`conf` with the archive's options added to the driver's Java options, and the plan.

    The key covers the driver's JARs (PySpark's and `conf`'s) and its Java options as set here.
    """
    plan = ArchivePlan("none")
    if is_enabled(environ):
        extra = [
            *conf.get("spark.jars", "").split(","),
            *conf.get("spark.driver.extraClassPath", "").split(os.pathsep),
        ]
        spark_home = Path(environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
        options = " ".join(
            [
                conf.get("spark.driver.extraJavaOptions", ""),
                conf.get("spark.driver.memory", ""),
                *(f"{name}={environ.get(name, '')}" for name in _JVM_ENV),
            ]
        )
        try:
            entries = class_path_entries(spark_home / "jars", extra)
            key = archive_key(java_release(environ), entries, options)
            may_write = archive_setting(environ) == "on"
            plan = plan_archive(cache, key, os.getpid(), may_write=may_write)
        except OSError:  # a cache that cannot be written: start without an archive
            plan = ArchivePlan("none")
    java_options = [conf.get("spark.driver.extraJavaOptions", ""), *plan.options]
    return {**conf, "spark.driver.extraJavaOptions": " ".join(filter(None, java_options))}, plan


def release(plan: ArchivePlan) -> None:
    """Give up writing the archive (the JVM did not start, or has written it): drop the lock."""
    if plan.lock is not None:
        plan.lock.close()


def java_release(environ: Mapping[str, str]) -> str:
    """The Java build a session starts with: its `release` file, else the `java` path itself."""
    home = environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else None
    if java is None or not java.exists():
        found = shutil.which("java", path=environ.get("PATH"))
        java = Path(found) if found else None
    if java is None:
        return ""
    root = java.resolve().parent.parent
    notes = root / "release"
    build = notes.read_text(errors="replace") if notes.is_file() else str(root)
    return "\n".join([build, *_described(root / name for name in _JVM_FILES)])


def class_path_entries(spark_jars: Path, extra: Iterable[str]) -> list[str]:
    """Every JAR the driver loads from, with its size and modification time."""
    return _described([*sorted(spark_jars.glob("*.jar")), *(Path(e) for e in extra if e)])


def _described(files: Iterable[Path]) -> list[str]:
    """Each file as `path:size:mtime`, or `path:missing`."""
    described = []
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            described.append(f"{path}:missing")
            continue
        described.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return described


def finish_writing(
    process: subprocess.Popen[bytes], plan: ArchivePlan, stop: Callable[[], None]
) -> bool:
    """Stop Spark, let the JVM exit, wait for it to write the archive, and move it into place.

    The JVM writes the archive as it exits, which it does when this process closes its stdin
    (PySpark's gateway watches it); `stop` first stops what talks to it (the SparkContext and
    its servers in this process). Returns True if the archive was moved into place.
    """
    exit_code: int | None = None
    try:
        if process.poll() is None:
            stopping = threading.Thread(target=_quietly, args=(stop,), daemon=True)
            stopping.start()
            stopping.join(STOP_WAIT_SECONDS)  # the JVM's own hook stops Spark too
            with contextlib.suppress(OSError, ValueError):
                print(
                    "lakehouse: saving the JVM's class archive for faster starts (once per "
                    "Java and class path)",
                    file=sys.stderr,
                    flush=True,
                )
            with contextlib.suppress(OSError, ValueError):
                if process.stdin is not None:
                    process.stdin.close()
            process.wait(timeout=WRITE_WAIT_SECONDS)
        exit_code = process.returncode
    except (OSError, subprocess.TimeoutExpired, KeyboardInterrupt):
        with contextlib.suppress(OSError):  # a JVM left running would write a file nobody moves
            process.kill()
        exit_code = None
    return settle_archive(plan, exit_code)


def settle_archive(plan: ArchivePlan, exit_code: int | None) -> bool:
    """Move a written archive into place after its JVM exited with `exit_code`; drop the lock.

    A JVM that failed, or did not exit in time (None), leaves no archive, and the next start
    writes one. A JVM that exited cleanly without writing one (a Java without its base archive)
    is marked, and not asked again for a day. Returns True if the archive was moved into place.
    """
    if plan.partial is None or plan.archive is None or plan.lock is None:
        return False
    try:
        written = exit_code == 0 and _is_nonempty(plan.partial)
        if written:
            plan.partial.replace(plan.archive)
            _remove_unused(plan.archive)
        elif exit_code == 0:
            plan.archive.with_suffix(".failed").touch()
        return written
    except OSError:
        return False
    finally:
        plan.partial.unlink(missing_ok=True)
        release(plan)


def write_at_exit(
    process: subprocess.Popen[bytes] | None, plan: ArchivePlan, stop: Callable[[], None]
) -> None:
    """Register `finish_writing` to run when this process exits; without a JVM, give it up."""
    if process is None:
        release(plan)
        return
    atexit.register(finish_writing, process, plan, stop)


def _locked(path: Path) -> IO[str] | None:
    """The open file of `path` with an exclusive `flock` on it, or None if another holds it."""
    handle = open(path, "a")  # noqa: SIM115 - held until the archive is settled
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _is_recent(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime < RETRY_SECONDS
    except OSError:
        return False


def _is_nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _remove_unused(kept: Path) -> None:
    """Remove other archives unused for a month, and other class paths' day-old partial ones."""
    now = time.time()
    for other in kept.parent.glob("classes-*.jsa"):
        with contextlib.suppress(OSError):
            if other != kept and should_remove((now - other.stat().st_mtime) / 86400):
                other.unlink()
    for partial in kept.parent.glob("classes-*.*.partial"):
        if not _is_recent(partial):
            partial.unlink(missing_ok=True)


def _remove_partials(archive: Path) -> None:
    """Remove the partial files of `archive`'s key: no writer of that key is running."""
    for left in archive.parent.glob(f"{archive.stem}.*.partial"):
        left.unlink(missing_ok=True)


def _quietly(call: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        call()
