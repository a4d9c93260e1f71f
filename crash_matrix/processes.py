"""The `lakehouse ingest` processes the crash matrix runs, stops and kills, and its own signals."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from crash_matrix.plan import BATCH_LINE, STOP_SIGNALS


def group_members(pgid: int) -> list[Path]:
    """The /proc entries of the group's running processes (zombies do not count)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(entry)
    return members


def group_alive(pgid: int) -> bool:
    """True while any process of the group is still running (zombies do not count)."""
    return bool(group_members(pgid))


def stop_stray_run(pgid: int, workdir: Path, grace: float = 60.0) -> bool:
    """SIGKILL the run of a stopped harness, if a process of its group is still alive.

    Only a group one of whose processes names the work directory (the JVM's lakehouse home) or
    `ingest.cli` (the driver) is touched, so a group id reused after a reboot is left alone. The
    JVM must not outlive the harness: it would go on writing the run's tables. True if a run was
    found and is gone.
    """
    marks = (str(workdir).encode(), b"ingest.cli")
    ours = False
    for entry in group_members(pgid):
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes()
            ours = ours or any(mark in command for mark in marks)
    if not ours:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_alive(pgid):
        progress(f"warning: process group {pgid} outlived SIGKILL; stop it before going on")
        return False
    progress(f"stopped the run under way (process group {pgid})")
    return True


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP stop the harness, but never in the middle of a bookkeeping step.

    A stop raises KeyboardInterrupt at once, except inside `deferred()` (spawning a run and
    recording its process group, counting a fault together with its case, saving), where it is
    held until the step ends: otherwise a run could be left alive unrecorded (its JVM holds the
    metastore's lock) or a fault counted twice on resume. Signals are not blocked, because a
    spawned run would inherit the mask and ignore the SIGTERMs it is sent.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.pending = False

    def install(self) -> None:
        """Route the three stop signals through `handle`."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, self.handle)

    def ignore(self) -> None:
        """Ignore further stops while the harness cleans up (no run is spawned after this)."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    def handle(self, signum: int, frame: object) -> None:
        """Stop now, or when the step under way ends."""
        if self.depth:
            self.pending = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold stops until the block ends (blocks nest)."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending:
                self.pending = False
                raise KeyboardInterrupt


INTERRUPTS = Interrupts()
Probe = Callable[[], tuple[int, int]]


class Run:
    """One `lakehouse ingest` process in its own process group, its output in log files.

    While it runs, a probe of the lakehouse home (checkpoint commits, files written) tells when
    the stream first wrote anything and when each batch finished.
    """

    def __init__(
        self, argv: Sequence[str], cwd: Path, env: dict[str, str], stem: Path, probe: Probe
    ) -> None:
        self.label = stem.name
        self.err_path = stem.with_suffix(".err")
        self._out: IO[bytes] = stem.with_suffix(".out").open("wb")
        self._err: IO[bytes] = self.err_path.open("wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
        )
        self.batch_lines = 0
        self.first_write: float | None = None
        self.batches_done: list[float] = []
        self._probe = probe
        self._commits, self._written = probe()
        self._offset = 0
        self._partial = b""

    def _observe(self) -> None:
        now = time.monotonic() - self.started
        commits, written = self._probe()
        if self.first_write is None and written != self._written:
            self.first_write = now
        self.batches_done.extend([now] * max(0, commits - self._commits))
        self._commits = max(commits, self._commits)
        with self.err_path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        self._offset += len(chunk)
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        self.batch_lines += sum(
            1 for raw in complete if BATCH_LINE.match(raw.decode("utf-8", "replace"))
        )

    def wait(self, timeout: float, *, until_write: bool = False) -> int | None:
        """Wait up to `timeout` seconds (or until the first write); the exit code or None."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            self._observe()
            if code is not None:
                return code
            if time.monotonic() >= deadline or (until_write and self.first_write is not None):
                return None
            time.sleep(0.2)

    def signal_group(self, sig: signal.Signals) -> None:
        """Send `sig` to every process of the run: the Python driver and its JVM."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def settle(self, grace: float = 60.0) -> None:
        """Wait until the whole group is gone (the metastore allows one JVM); SIGKILL stragglers."""
        self.proc.wait()
        deadline = time.monotonic() + grace
        while group_alive(self.proc.pid):
            if time.monotonic() >= deadline:
                self.signal_group(signal.SIGKILL)
                deadline = time.monotonic() + grace
            time.sleep(0.2)
        self._observe()
        self._out.close()
        self._err.close()

    def error_line(self) -> str:
        """The run's last `error:` line on stderr, or its last line."""
        lines = self.err_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        errors = [line for line in lines if line.startswith("error:")]
        return (errors or lines or ["(no output)"])[-1]


def count_entries(directory: Path, *, digits: bool = False) -> int:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    return sum(1 for n in names if n.isdigit()) if digits else len(names)


def progress(message: str) -> None:
    """One progress line on stderr (the summary goes to stdout)."""
    print(f"verify: {message}", file=sys.stderr, flush=True)
