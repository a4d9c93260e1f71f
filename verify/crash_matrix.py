"""`make verify`: crash a real ingestion over and over, then prove each record landed exactly once.

Unit tests check each step of the commit protocol; only whole processes dying at awkward moments
show whether the steps add up. The harness generates known records into a landing directory and
keeps its own ledger of their ids (a CSV file, appended and fsynced, outside Spark). It runs
`lakehouse ingest` in subprocesses and kills them: once at each fault point of `tables.faults`
with each crash action, then at random times with SIGKILL or SIGTERM sent to the whole process
group (Python driver and JVM), restarting until the input is consumed. One Spark session then
reads the tables and the log: every ledger id must be in the target or the quarantine table,
none twice, and the app's log marker must be the last batch. It prints one summary line.

Crash actions at a fault point: SIGKILL (`kill`) and SIGTERM (`term`), each sent by the process
to itself at that place. Random kills send real SIGKILLs and SIGTERMs to the process group, so
the JVM also dies mid-batch.

Linux only (process groups are tracked through /proc). Each `lakehouse` process starts a JVM:
on 2 cores about 30 s from spawn to the stream's first write (17 s of them Spark and the
metastore), then about 16 s for its first batch and 7 s for each later one (commit 3.4 s, audit
1.9 s, recording the audit 1.5 s). So the default run (100,000 records, 200 random kills) takes
three to four hours there (the first full run took 4.3, partly beside CI); `--records 10000
--random-kills 10` took 13 minutes and `--quick` (1,200 records, the three between-writes fault
points, 2 random kills) about 5. The harness saves its progress in the work directory after
every step: stopped (Ctrl-C, SIGTERM, a lost machine), it goes on with `--workdir DIR --resume`,
and its figures cover every invocation.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, get_args

from tables.errors import first_line
from tables.faults import ENV_VAR, FaultAction, FaultPoint

TABLE = "events"
QUARANTINE = f"{TABLE}_quarantine"
KEY = "event_id"
RAW_COLUMN = "_lh_raw"
APP_ID = "verify-landing"
PIPELINE = "landing"
ID_PATTERN = re.compile(r"\br\d{9}\b")
BATCH_LINE = re.compile(r"^batch (\d+): (committed|skipped|empty)\b")
MALFORMED_SHARE = 0.005
REPEAT_SHARE = 0.005
RESEND_SHARE = 0.01
STARTUP_KILL_SHARE = 0.15
CRASH_ACTIONS = ("kill", "term", "exit")
EXPECTED_EXIT = {"kill": -signal.SIGKILL, "term": -signal.SIGTERM, "exit": 137}
STATE_FILE = "harness.json"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIZES = ("records", "batch_size", "random_kills", "seed")
FULL = {"records": 100_000, "batch_size": 750, "random_kills": 200}
QUICK = {"records": 1_200, "batch_size": 200, "random_kills": 2}
#: The points `--quick` crashes at: the states between two writes (quarantine files written but
#: not committed, table files written but not committed, checkpoint written but next batch not
#: begun). The other points are crashed in-process by the unit tests and by the full run.
QUICK_POINTS = ("mid_quarantine", "before_commit", "after_checkpoint")
CONFIG = f"""\
# Written by verify/crash_matrix.py: one file per batch, every resend matched against the table.
[lakehouse]
home = "home"

[tables.{TABLE}]
schema = "{KEY} STRING NOT NULL, user_id STRING, amount DOUBLE, seq BIGINT"
keys = ["{KEY}"]
dedup = "table"

[pipelines.{PIPELINE}]
table = "{TABLE}"
app_id = "{APP_ID}"
trigger = "available-now"

[pipelines.{PIPELINE}.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""


@dataclass(frozen=True)
class Line:
    """One line of an input file and what the ledger says about it.

    `kind` is `valid` or `malformed` for a record's first line, `repeat` for a copy later in the
    same file and `resend` for a copy in a later file; copies must not land again.
    """

    record_id: str
    kind: str
    text: str


@dataclass(frozen=True)
class Ledger:
    """The ids the generator wrote, read back from its ledger file, split by where they belong."""

    valid: frozenset[str]
    malformed: frozenset[str]
    lines: int
    files: int

    @property
    def records(self) -> int:
        """Distinct records written, valid or not."""
        return len(self.valid | self.malformed)


@dataclass(frozen=True)
class Comparison:
    """The tables' ids set against the ledger's; every count but the first three must be 0.

    `duplicates` counts extra copies in the target, extra copies in the quarantine, and ids found
    in both; `misplaced` counts ids on the wrong side or unknown to the ledger; `unidentified`
    counts quarantine rows whose raw text names no single record id.
    """

    records: int
    landed: int
    quarantined: int
    duplicates: int
    losses: int
    misplaced: int
    unidentified: int


@dataclass
class Figures:
    """Everything one harness run measured, for the summary line and the JSON file."""

    records: int = 0
    files: int = 0
    point_faults: int = 0
    random_kills: int = 0
    sigterms: int = 0
    resumes: int = 0
    kills_after_write: int = 0
    restarts: int = 0
    landed: int = 0
    quarantined: int = 0
    duplicates: int = 0
    losses: int = 0
    misplaced: int = 0
    unidentified: int = 0
    marker: int | None = None
    last_batch: int = -1
    checkpoint_batch: int | None = None
    ledger_batches_ok: bool = False
    consumed: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    not_fired: list[str] = field(default_factory=list)

    @property
    def faults(self) -> int:
        """Faults injected: fault points that fired plus random kills."""
        return self.point_faults + self.random_kills

    @property
    def marker_ok(self) -> bool:
        """The log's marker, the checkpoint and the per-batch ledger all end at the last batch."""
        return (
            self.marker == self.last_batch == self.checkpoint_batch
            and self.ledger_batches_ok
            and self.last_batch >= 0
        )

    @property
    def ok(self) -> bool:
        """Exactly once: input consumed, nothing lost, nothing twice, nothing misplaced."""
        return (
            self.consumed
            and self.duplicates == 0
            and self.losses == 0
            and self.misplaced == 0
            and self.unidentified == 0
            and self.marker_ok
        )

    def as_json(self) -> dict[str, object]:
        """The figures plus the derived verdicts, for `--json`."""
        return {**asdict(self), "faults": self.faults, "marker_ok": self.marker_ok, "ok": self.ok}


def record_id(number: int) -> str:
    """The id of record `number`: recognisable in any raw text, e.g. r000000123."""
    return f"r{number:09d}"


def record_text(rng: random.Random, number: int) -> str:
    """A well-formed JSON line for record `number`."""
    row = {
        KEY: record_id(number),
        "user_id": f"u{rng.randrange(1000):04d}",
        "amount": round(rng.uniform(1, 500), 2),
        "seq": number,
    }
    return json.dumps(row, separators=(",", ":"))


def malformed_text(number: int) -> str:
    """A truncated JSON line that cannot parse but still names its record id in the raw text."""
    return f'{{"{KEY}": "{record_id(number)}", "amount": "not-a-number"'


def plan_files(records: int, batch_size: int, seed: int) -> list[list[Line]]:
    """The input: `batch_size` new records per file, some malformed, some lines sent twice.

    Every file of two or more records has at least one malformed line, so `mid_quarantine` fires
    at any batch; each file after the first resends exact copies of valid lines of earlier files.
    """
    if records < 1 or batch_size < 1:
        raise ValueError("records and batch size must be at least 1")
    rng = random.Random(seed)
    files: list[list[Line]] = []
    earlier: list[Line] = []
    for first in range(0, records, batch_size):
        count = min(batch_size, records - first)
        bad_count = min(count - 1, max(1, round(count * MALFORMED_SHARE)))
        bad = set(rng.sample(range(count), bad_count))
        lines = [
            Line(record_id(first + i), "malformed", malformed_text(first + i))
            if i in bad
            else Line(record_id(first + i), "valid", record_text(rng, first + i))
            for i in range(count)
        ]
        valid = [line for line in lines if line.kind == "valid"]
        extras = [
            Line(line.record_id, "repeat", line.text)
            for line in rng.sample(valid, min(len(valid), round(count * REPEAT_SHARE)))
        ]
        if earlier:
            resent = rng.sample(earlier, min(len(earlier), max(1, round(count * RESEND_SHARE))))
            extras += [Line(line.record_id, "resend", line.text) for line in resent]
        for extra in extras:
            lines.insert(rng.randrange(len(lines) + 1), extra)
        files.append(lines)
        earlier.extend(valid)
    return files


def file_name(index: int) -> str:
    """The landing name of input file `index`; its batch id is the same number."""
    return f"events-{index:06d}.json"


def append_ledger(path: Path, name: str, lines: Iterable[Line]) -> None:
    """Append a file's lines (id, kind, file) to the ledger and fsync it before the file lands."""
    with path.open("a", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows((line.record_id, line.kind, name) for line in lines)
        handle.flush()
        os.fsync(handle.fileno())


def read_ledger_file(path: Path) -> Ledger:
    """Read the generator's ledger back: which ids must land and which must be quarantined."""
    valid: set[str] = set()
    malformed: set[str] = set()
    files: set[str] = set()
    lines = 0
    with path.open(encoding="utf-8", newline="") as handle:
        for rid, kind, name in csv.reader(handle):
            lines += 1
            files.add(name)
            if kind == "valid":
                valid.add(rid)
            elif kind == "malformed":
                malformed.add(rid)
    return Ledger(frozenset(valid), frozenset(malformed), lines, len(files))


def compare(ledger: Ledger, target_ids: Sequence[str], quarantine_raw: Sequence[str]) -> Comparison:
    """Set the target's ids and the ids in the quarantine's raw text against the ledger."""
    quarantine_ids: list[str] = []
    unidentified = 0
    for raw in quarantine_raw:
        found = set(ID_PATTERN.findall(raw))
        if len(found) == 1:
            quarantine_ids.append(found.pop())
        else:
            unidentified += 1
    target = set(target_ids)
    quarantined = set(quarantine_ids)
    both = target & quarantined
    expected = ledger.valid | ledger.malformed
    return Comparison(
        records=len(expected),
        landed=len(target),
        quarantined=len(quarantined),
        duplicates=(len(target_ids) - len(target))
        + (len(quarantine_ids) - len(quarantined))
        + len(both),
        losses=len(expected - target - quarantined),
        misplaced=len(target - ledger.valid - both) + len(quarantined - ledger.malformed - both),
        unidentified=unidentified,
    )


def summary_line(figures: Figures) -> str:
    """The one line `make verify` prints: the figures, then `ok` or `FAILED`."""
    marker = "none" if figures.marker is None else str(figures.marker)
    return (
        f"verify: faults={figures.faults} point_faults={figures.point_faults} "
        f"random_kills={figures.random_kills} sigterms={figures.sigterms} "
        f"restarts={figures.restarts} records={figures.records} landed={figures.landed} "
        f"quarantined={figures.quarantined} duplicates={figures.duplicates} "
        f"losses={figures.losses} misplaced={figures.misplaced} "
        f"marker={marker}/{figures.last_batch} time={figures.seconds:.0f}s "
        + ("ok" if figures.ok else "FAILED")
    )


def fault_cases(
    points: Sequence[str], actions: Sequence[str], *, quick: bool
) -> list[tuple[str, str]]:
    """Each fault point with each crash action, or (quick) each quick point once, actions
    alternating."""
    if quick:
        chosen = [p for p in points if p in QUICK_POINTS]
        return [(point, actions[i % len(actions)]) for i, point in enumerate(chosen)]
    return [(point, action) for point in points for action in actions]


def crash_actions(available: Sequence[str]) -> tuple[str, ...]:
    """SIGKILL, then SIGTERM if the package has a `term` action, else `exit` standing in for it."""
    kinds = [a for a in CRASH_ACTIONS if a in available]
    if "term" in kinds and "exit" in kinds:
        kinds.remove("exit")
    return tuple(kinds)


def choose_kill(
    rng: random.Random,
    timing: Timing,
    remaining_batches: int,
    remaining_kills: int,
) -> tuple[bool, float]:
    """When to kill a run: (after its first batch activity?, seconds after spawn or after that).

    A share of the kills hit JVM start-up and pipeline setup (seconds after spawn). The rest wait
    for the stream's first write, then fall within the time the run needs, on average, for its
    share of the batches still to run: a fresh JVM's first batch (several times a later one),
    then later batches. So the kills spread over the whole input and over every stage of a batch,
    the post-commit audit included. With more kills left than batches, the kills fall in the
    first half of a run's first batch, mostly before its checkpoint, so the input lasts for more
    of them (the first full run ran out of input with 20 of its 200 kills left). A run can still
    outlast its kill time and consume the rest, so the count stays a ceiling.
    """
    if rng.random() < STARTUP_KILL_SHARE:
        return False, rng.uniform(0.25 * timing.startup, timing.startup)
    if remaining_kills > remaining_batches:
        return True, rng.uniform(0.0, 0.5 * timing.first_batch)
    share = max(1.0, 2.0 * remaining_batches / max(1, remaining_kills))
    return True, rng.uniform(0.0, timing.first_batch + timing.batch * (share - 1.0))


@dataclass
class Timing:
    """Running estimates of start-up and batch times, learned from what the runs wrote when."""

    startups: list[float] = field(default_factory=list)
    first_batches: list[float] = field(default_factory=list)
    batches: list[float] = field(default_factory=list)

    @property
    def batch(self) -> float:
        """Median seconds between two checkpoint commits of one run (5 s until measured)."""
        return statistics.median(self.batches[-100:]) if self.batches else 5.0

    @property
    def first_batch(self) -> float:
        """Median seconds from a run's first write to its first checkpoint commit.

        A fresh JVM's first batch takes several times a later one (JIT, first Delta snapshot);
        until one is measured it is taken as three later batches. A run that only finished a
        batch an earlier run had begun writes first late in that batch (its offsets exist; a
        skip writes nothing before the checkpoint), so samples shorter than a later batch are
        left out: counted in, they pulled the median to 0 and the kills to the batch's start.
        """
        full = [s for s in self.first_batches[-100:] if s >= self.batch]
        return statistics.median(full[-20:]) if full else 3 * self.batch

    @property
    def startup(self) -> float:
        """Median seconds from spawn to the stream's first write (20 s until measured)."""
        return statistics.median(self.startups[-20:]) if self.startups else 20.0

    def learn(self, first_write: float | None, batches_done: Sequence[float]) -> None:
        """Take in when (seconds after spawn) a run first wrote and when it finished batches."""
        self.batches.extend(b - a for a, b in itertools.pairwise(batches_done))
        if first_write is not None:
            self.startups.append(first_write)
            if batches_done:
                self.first_batches.append(batches_done[0] - first_write)


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


class Harness:
    """The landing directory, the ledger, the runs and the figures of one verification.

    Its progress (figures, timings, runs started, fault cases done, the random generator, the
    process group of the run under way) is saved in the work directory after every step, so a
    harness that is itself stopped can go on with `--resume`: the full run takes hours.
    """

    def __init__(self, workdir: Path, settings: dict[str, Any]) -> None:
        self.workdir = workdir
        self.settings = settings
        self.plan = plan_files(settings["records"], settings["batch_size"], settings["seed"])
        self.rng = random.Random(settings["seed"] + 1)
        self.timeout = float(settings["run_timeout"])
        self.landing = workdir / "landing"
        self.staging = workdir / "staging"
        self.runs = workdir / "runs"
        self.ledger = workdir / "ledger.csv"
        self.config = workdir / "lakehouse.toml"
        self.home = workdir / "home"
        self.checkpoint = self.home / "checkpoints" / APP_ID
        self.landed = 0
        self.started = 0
        self.cases_done = 0
        self.running: int | None = None
        self.seconds_before = 0.0
        self.clock = time.monotonic()
        self.timing = Timing()
        self.figures = Figures(files=len(self.plan), last_batch=len(self.plan) - 1)
        self.env = {
            k: v for k, v in os.environ.items() if k not in (ENV_VAR, "PYSPARK_GATEWAY_PORT")
        }
        self.env.setdefault("LAKEHOUSE_SPARK_MASTER", "local[2]")
        self.env["PYTHONUNBUFFERED"] = "1"

    def prepare(self) -> None:
        """Write the config and stage every input file (outside the landing directory)."""
        with INTERRUPTS.deferred():
            for directory in (self.landing, self.staging, self.runs):
                directory.mkdir(parents=True)
            self.config.write_text(CONFIG, encoding="utf-8")
            for index, lines in enumerate(self.plan):
                path = self.staging / file_name(index)
                with path.open("w", encoding="utf-8") as handle:
                    handle.write("".join(line.text + "\n" for line in lines))
                    handle.flush()
                    os.fsync(handle.fileno())
            self.save()

    def elapsed(self) -> float:
        """Seconds spent on this verification, over every invocation of the harness."""
        return self.seconds_before + time.monotonic() - self.clock

    def save(self) -> None:
        """Write the progress to the work directory atomically (write, fsync, rename)."""
        state = {
            "settings": self.settings,
            "figures": asdict(self.figures),
            "timing": asdict(self.timing),
            "started": self.started,
            "cases_done": self.cases_done,
            "running": self.running,
            "seconds": self.elapsed(),
            "rng": self.rng.getstate(),
        }
        path = self.workdir / STATE_FILE
        temporary = path.with_suffix(".tmp")
        with INTERRUPTS.deferred():
            with temporary.open("w", encoding="utf-8") as handle:
                json.dump(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)

    @classmethod
    def resume(cls, workdir: Path) -> Harness:
        """The harness saved in `workdir`, its stray run (if still alive) killed, ready to go on.

        What has landed is read from the landing directory, not the state: the harness may have
        stopped between a file's ledger entry and its rename (the ledger then lists that file's
        lines twice, which changes no set of ids).
        """
        state = json.loads((workdir / STATE_FILE).read_text(encoding="utf-8"))
        harness = cls(workdir, state["settings"])
        harness.figures = Figures(**state["figures"])
        harness.timing = Timing(**state["timing"])
        harness.started = int(state["started"])
        harness.cases_done = int(state["cases_done"])
        harness.seconds_before = float(state["seconds"])
        version, internal, gauss = state["rng"]
        harness.rng.setstate((version, tuple(internal), gauss))
        harness.landed = _count(harness.landing)
        harness.figures.resumes += 1
        harness.running = state["running"]
        harness.stop_running()
        harness.save()
        return harness

    def land_through(self, last: int) -> None:
        """Land staged files up to index `last`: ledger first, then an atomic rename.

        Modification times increase with the index, so the stream takes one file per batch in
        order and batch id n is file n.
        """
        base = int(time.time())
        while self.landed <= min(last, len(self.plan) - 1):
            name = file_name(self.landed)
            append_ledger(self.ledger, name, self.plan[self.landed])
            staged = self.staging / name
            os.utime(staged, (base + self.landed, base + self.landed))
            os.replace(staged, self.landing / name)
            self.landed += 1
        descriptor = os.open(self.landing, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def start(self, label: str, fault: str | None) -> Run:
        """Spawn `lakehouse ingest` with an optional LAKEHOUSE_FAULT rule."""
        env = dict(self.env)
        if fault:
            env[ENV_VAR] = fault
        argv = [sys.executable, "-m", "ingest.cli", "ingest", "--config", str(self.config)]
        with INTERRUPTS.deferred():
            self.started += 1
            self.figures.restarts = self.started - 1
            run = Run(
                argv, self.workdir, env, self.runs / f"{self.started:04d}-{label}", self.probe
            )
            self.running = run.proc.pid
            self.save()
        return run

    def probe(self) -> tuple[int, int]:
        """(checkpoint commits, entries in the checkpoint and the tables' logs) right now."""
        commits = _count(self.checkpoint / "commits", digits=True)
        logs = [self.home / "warehouse" / t / "_delta_log" for t in (TABLE, QUARANTINE)]
        return commits, commits + _count(self.checkpoint / "offsets") + sum(map(_count, logs))

    def finish(self, run: Run, code: int | None) -> int | None:
        """Stop a run that overran, wait for its group to end, learn its timings."""
        if code is None:
            run.signal_group(signal.SIGKILL)
            self.figures.errors.append(f"{run.label}: still running after {self.timeout:.0f} s")
        run.settle()
        with INTERRUPTS.deferred():
            self.running = None
            self.timing.learn(run.first_write, run.batches_done)
            self.save()
        return code

    def checkpoint_batch(self) -> int | None:
        """The last batch the stream checkpoint marks as done (`commits/<n>`), if any."""
        commits = self.checkpoint / "commits"
        if not commits.exists():
            return None
        return max((int(p.name) for p in commits.iterdir() if p.name.isdigit()), default=None)

    def fault_phase(self, cases: Sequence[tuple[str, str]]) -> None:
        """Fire each (point, action) once, at successive batches; each run restarts the last.

        Faults go one or two batches apart (two when the input is long enough), so that runs
        also finish whole batches and their timings can be learned. A case interrupted by a
        stop of the harness is fired again on resume, at the next batch the stream will run if
        its own batch is already done.
        """
        usable = max(0, len(self.plan) - 1)
        too_few = (
            f"only {usable} batches for {len(cases)} fault cases: "
            f"skipped {[f'{p}:{a}' for p, a in cases[usable:]]}"
        )
        if len(cases) > usable and too_few not in self.figures.errors:
            self.figures.errors.append(too_few)
        gap = 2 if len(self.plan) > 3 * len(cases) else 1
        for number, (point, action) in enumerate(cases[:usable]):
            if number < self.cases_done:
                continue
            done = self.checkpoint_batch()
            batch = max(1 + number * gap, 0 if done is None else done + 1)
            rule = f"{point}:{action}@{batch}"
            if batch > usable:
                with INTERRUPTS.deferred():
                    self.figures.errors.append(f"no batch left for fault {rule}")
                    self.cases_done = number + 1
                    self.save()
                continue
            self.land_through(batch)
            run = self.start(f"{point}-{action}", rule)
            code = self.finish(run, run.wait(self.timeout))
            with INTERRUPTS.deferred():
                if code == EXPECTED_EXIT[action]:
                    self.figures.point_faults += 1
                elif code == 0:
                    self.figures.not_fired.append(rule)
                else:
                    self.figures.errors.append(f"{run.label}: exit {code}: {run.error_line()}")
                self.cases_done = number + 1
                self.save()
            progress(f"fault {rule}: exit {code}")

    def random_phase(self, kills: int) -> None:
        """Land everything, then kill runs at random times until `kills` or the input runs out."""
        self.land_through(len(self.plan) - 1)
        failures_in_row = 0
        while (
            not self.figures.consumed and self.figures.random_kills < kills and failures_in_row < 3
        ):
            done = self.checkpoint_batch()
            remaining = self.figures.last_batch - (-1 if done is None else done)
            after_write, delay = choose_kill(
                self.rng, self.timing, remaining, kills - self.figures.random_kills
            )
            run = self.start("random", None)
            code = run.wait(self.timeout, until_write=True) if after_write else None
            if code is None:
                code = run.wait(delay)
            if code is None:
                self.kill(run, kills)
                failures_in_row = 0
                continue
            self.record_end(run, self.finish(run, code))
            failures_in_row += 1

    def kill(self, run: Run, kills: int) -> None:
        """Kill a run's whole group with SIGKILL, or SIGTERM a third of the time."""
        sig = signal.SIGTERM if self.rng.random() < 1 / 3 else signal.SIGKILL
        at = time.monotonic() - run.started
        f = self.figures
        with INTERRUPTS.deferred():
            run.signal_group(sig)
            f.random_kills += 1
            f.sigterms += sig == signal.SIGTERM
            f.kills_after_write += run.first_write is not None
        self.finish(run, run.wait(self.timeout))
        progress(
            f"random kill {f.random_kills}/{kills}: {sig.name} at {at:.1f} s"
            + (f" ({at - run.first_write:.1f} s after the first write)" if run.first_write else "")
            + f", {run.batch_lines} batch line(s), checkpoint at {self.checkpoint_batch()}"
        )

    def final_phase(self, attempts: int = 3) -> None:
        """Run without faults until the input is consumed (exit 0), a few attempts at most."""
        for _ in range(attempts):
            if self.figures.consumed:
                return
            run = self.start("final", None)
            self.record_end(run, self.finish(run, run.wait(self.timeout)))

    def record_end(self, run: Run, code: int | None) -> None:
        """Record how a run that was not killed ended: input consumed (exit 0), or an error."""
        with INTERRUPTS.deferred():
            if code == 0:
                self.figures.consumed = True
            else:
                self.figures.errors.append(f"{run.label}: exit {code}: {run.error_line()}")
            self.save()

    def stop_running(self) -> None:
        """Kill the run under way, if any, and save: no run outlives the harness."""
        if self.running is not None:
            stop_stray_run(self.running, self.workdir)
            self.running = None
            self.save()

    def verify(self) -> None:
        """Read the tables and the log, fill in the verdict's figures; a failure is one of them."""
        try:
            self._verify()
        except Exception as exc:
            self.figures.errors.append(f"verification failed: {first_line(exc)}")
            self.figures.consumed = False

    def _verify(self) -> None:
        os.environ.setdefault("LAKEHOUSE_SPARK_MASTER", "local[2]")
        from tables.catalog import require_table
        from tables.log import read_ledger
        from tables.markers import committed_batch
        from tables.session import get_spark

        spark = get_spark(self.home, app_name="lakehouse-verify")
        try:
            # A new session knows a table only once it is looked up in the warehouse.
            for table in (TABLE, QUARANTINE):
                require_table(spark, table)
            target = [str(r[0]) for r in spark.table(TABLE).select(KEY).collect()]
            raw = [str(r[0] or "") for r in spark.table(QUARANTINE).select(RAW_COLUMN).collect()]
            marker = committed_batch(spark, TABLE, APP_ID)
            batches = sorted(
                e.meta.batch_id
                for e in read_ledger(spark, TABLE, app_id=APP_ID)
                if e.meta.kind == "batch"
            )
        finally:
            spark.stop()
        found = compare(read_ledger_file(self.ledger), target, raw)
        f = self.figures
        f.records, f.landed, f.quarantined = found.records, found.landed, found.quarantined
        f.duplicates, f.losses = found.duplicates, found.losses
        f.misplaced, f.unidentified = found.misplaced, found.unidentified
        f.marker, f.checkpoint_batch = marker, self.checkpoint_batch()
        f.ledger_batches_ok = batches == list(range(len(self.plan)))
        if not f.ledger_batches_ok:
            f.errors.append(f"log ledger batch ids {batches} != 0..{f.last_batch}, once each")
        if any(self.staging.iterdir()):
            f.errors.append("some staged files were never landed")
            f.consumed = False


def _count(directory: Path, *, digits: bool = False) -> int:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    return sum(1 for n in names if n.isdigit()) if digits else len(names)


def progress(message: str) -> None:
    """One progress line on stderr (the summary goes to stdout)."""
    print(f"verify: {message}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options; `--quick` changes only the defaults of the sizes."""
    parser = argparse.ArgumentParser(prog="python -m verify.crash_matrix", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="CI preset (1,200 records, 3 fault points, 2 kills)"
    )
    parser.add_argument("--records", type=int, help="distinct records (default 100,000)")
    parser.add_argument("--batch-size", type=int, help="records per file/batch (default 750)")
    parser.add_argument("--random-kills", type=int, help="random kills (default 200)")
    parser.add_argument("--seed", type=int, help="seed of the input and the kills (default 1)")
    parser.add_argument("--workdir", type=Path, help="empty or new directory (kept)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--run-timeout", type=float, help="seconds per run (default 1800)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the stopped verification in --workdir, with its saved sizes",
    )
    args = parser.parse_args(argv)
    if args.resume:
        if args.workdir is None:
            parser.error("--resume needs the --workdir of the verification to go on with")
        given = [n for n in (*SIZES, "run_timeout") if getattr(args, n) is not None]
        if given or args.quick:
            parser.error(
                "--resume takes the sizes saved in --workdir; drop "
                + ", ".join(
                    f"--{n.replace('_', '-')}" for n in [*given, *(["quick"] if args.quick else [])]
                )
            )
        return args
    preset = {**(QUICK if args.quick else FULL), "seed": 1, "run_timeout": 1800.0}
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.records < 1 or args.batch_size < 1:
        parser.error("--records and --batch-size must be at least 1")
    if args.random_kills < 0 or args.run_timeout <= 0:
        parser.error("--random-kills must be 0 or more and --run-timeout above 0")
    return args


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The options a verification keeps for its whole life (saved for `--resume`)."""
    return {name: getattr(args, name) for name in (*SIZES, "quick", "run_timeout")}


def start_harness(args: argparse.Namespace) -> Harness | str:
    """A new harness in a new or empty work directory, or the saved one (`--resume`); or why not."""
    if args.resume:
        if not (args.workdir / STATE_FILE).exists():
            return f"--workdir {args.workdir} holds no verification to resume ({STATE_FILE})"
        return Harness.resume(args.workdir.resolve())
    if args.workdir is not None and args.workdir.exists() and any(args.workdir.iterdir()):
        return f"--workdir {args.workdir} is not empty (add --resume to go on with it)"
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="lakehouse-verify-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    harness = Harness(workdir, settings_of(args))
    harness.prepare()
    return harness


def main(argv: Sequence[str] | None = None) -> int:
    """Run every phase, print the summary line; 0 only if every record landed exactly once."""
    args = parse_args(argv)
    INTERRUPTS.install()
    try:
        harness = start_harness(args)
    except KeyboardInterrupt:
        progress("stopped before the first run")
        return 130
    if isinstance(harness, str):
        print(f"error: {harness}", file=sys.stderr)
        return 2
    settings, workdir = harness.settings, harness.workdir
    points = [str(p) for p in get_args(FaultPoint)]
    cases = fault_cases(points, crash_actions(get_args(FaultAction)), quick=settings["quick"])
    progress(
        f"{settings['records']} records in {len(harness.plan)} files, {len(cases)} fault cases, "
        f"{settings['random_kills']} random kills, in {workdir}"
        + (f" (resumed after {harness.started} runs)" if args.resume else "")
    )
    stopped = False
    try:
        harness.fault_phase(cases)
        harness.random_phase(settings["random_kills"])
        harness.final_phase()
        harness.verify()
    except KeyboardInterrupt:
        stopped = True
    finally:
        INTERRUPTS.ignore()
        harness.stop_running()
    if stopped:
        progress(f"stopped; go on with: python -m verify.crash_matrix --workdir {workdir} --resume")
        return 130
    figures = harness.figures
    figures.seconds = harness.elapsed()
    for problem in figures.errors:
        progress(f"note: {problem}")
    if figures.not_fired:
        progress(f"note: fault rules that never fired: {', '.join(figures.not_fired)}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures.as_json(), indent=2) + "\n", encoding="utf-8")
    print(summary_line(figures), flush=True)
    if figures.ok and args.workdir is None:
        shutil.rmtree(workdir)
    elif not figures.ok:
        progress(f"state and run logs kept in {workdir}")
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
