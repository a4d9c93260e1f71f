"""Fault points at named places of the commit path, for crash and recovery tests.

Switched on only by the LAKEHOUSE_FAULT environment variable, so a normal run pays one dict lookup
per point. The value is a comma-separated list of `point:action[@batch][%percent]`, e.g.
`after_commit:exit@2` (exit the process right after batch 2's Delta commit) or
`after_commit:raise%10` (raise on about 10% of batches). `LAKEHOUSE_FAULT_SEED` seeds the
percent rolls, so a run with the same seed hits the same batches.

Points, in the order a batch reaches them:
- `mid_quarantine`: the quarantine append has written data files, its log entry is not written;
- `before_write`: before a MERGE attempt, nothing of the attempt written;
- `before_commit`: the MERGE has written data files into the table, its log entry is not written;
- `after_commit`: the MERGE's log entry is written, the result is not reported yet;
- `before_audit`: committed, not yet audited (the audit precedes the stream checkpoint);
- `after_checkpoint`: Spark wrote the stream checkpoint of the batch, the next batch not begun.

And one of `lakehouse reset-app` (its "batch" is the batch id the markers move to):
- `mid_reset`: a marker of the reset is committed, the next one is not.
And one of a run's scheduled upkeep (`ingest.maintenance`), after the batch settled:
- `before_maintenance`: the batch is committed and audited, its upkeep not begun.
And one of a schema evolution (`ingest.commit.evolve`), before the batch's data commit:
- `after_schema_commit`: the batch's new columns are committed, its data is not.
And one of a routed pipeline (`ingest.targets`), before each write after a batch's first:
- `between_targets`: a target has the batch, the next target (or the dead-letter table) not.

The two "files written, log entry not" points are watched: while the write runs, a thread lists
the table directory and fires once a new data file appears, which is the pre-commit state of a
two-phase commit. A thread cannot raise into the write, so those two points take only the process
actions.

Actions: `raise` an InjectedFaultError (a transient error), `exit` the process at once with
status 137 without cleanup, `kill` it with SIGKILL, `term` it with SIGTERM (Python's default
disposition: the process ends at once; the JVM then loses its driver), or `stall` it with SIGSTOP
sent to its process group (driver and JVM), a zombie until someone sends SIGCONT.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlparse

from tables.errors import ConfigError, InjectedFaultError

FaultPoint = Literal[
    "mid_quarantine",
    "before_write",
    "before_commit",
    "after_commit",
    "before_audit",
    "after_checkpoint",
]
#: Points the crash matrix does not walk: an operator command's, the run's upkeep, an evolution,
#: a routed batch's.
AdminFaultPoint = Literal[
    "mid_reset", "before_maintenance", "after_schema_commit", "between_targets"
]
ALL_POINTS: tuple[str, ...] = (*get_args(FaultPoint), *get_args(AdminFaultPoint))
FaultAction = Literal["raise", "exit", "kill", "term", "stall"]
ENV_VAR = "LAKEHOUSE_FAULT"
#: A record whose text holds `CRASH_MARKER` crashes what reads it: `worker` ends the Python
#: worker, `jvm` the driver JVM (tests of `ingest.isolation`; a normal run never sets it).
RECORD_CRASH_ENV = "LAKEHOUSE_FAULT_RECORD"
CRASH_MARKER = "LAKEHOUSE-CRASH-RECORD"
RecordCrash = Literal["worker", "jvm"]
SEED_ENV_VAR = "LAKEHOUSE_FAULT_SEED"
#: Points fired by a thread watching for data files, which can only act on the whole process.
WATCHED_POINTS: frozenset[str] = frozenset({"mid_quarantine", "before_commit"})
PROCESS_ACTIONS: frozenset[str] = frozenset({"exit", "kill", "term", "stall"})
_WATCH_INTERVAL_SECONDS = 0.005
_TERM_GRACE_SECONDS = 30
_rolls: dict[str, random.Random] = {}
_term_injected = threading.Event()


@dataclass(frozen=True)
class FaultRule:
    """One armed fault: where, what, and optionally on which batch or how often."""

    point: FaultPoint | AdminFaultPoint
    action: FaultAction
    batch_id: int | None = None
    percent: float | None = None

    def matches(self, point: str, batch_id: int, roll: float) -> bool:
        """Return True if this rule fires at `point` for `batch_id` given a roll in [0, 100)."""
        if point != self.point:
            return False
        if self.batch_id is not None and batch_id != self.batch_id:
            return False
        return self.percent is None or roll < self.percent


def parse_rules(text: str) -> tuple[FaultRule, ...]:
    """Parse the LAKEHOUSE_FAULT syntax; raise ConfigError on anything unknown."""
    rules = []
    for raw in filter(None, (part.strip() for part in text.split(","))):
        spec, _, percent = raw.partition("%")
        spec, _, batch = spec.partition("@")
        point, _, action = spec.partition(":")
        if point not in ALL_POINTS or action not in get_args(FaultAction):
            raise ConfigError(
                f"invalid {ENV_VAR} rule {raw!r}: expected point:action with point in "
                f"{ALL_POINTS} and action in {get_args(FaultAction)}"
            )
        if point in WATCHED_POINTS and action not in PROCESS_ACTIONS:
            raise ConfigError(
                f"invalid {ENV_VAR} rule {raw!r}: {point} fires from a watching thread, so it "
                f"takes only {sorted(PROCESS_ACTIONS)}"
            )
        try:
            rules.append(
                FaultRule(
                    point=point,  # type: ignore[arg-type]
                    action=action,  # type: ignore[arg-type]
                    batch_id=int(batch) if batch else None,
                    percent=float(percent) if percent else None,
                )
            )
        except ValueError as exc:
            raise ConfigError(f"invalid {ENV_VAR} rule {raw!r}: {exc}") from exc
    return tuple(rules)


def armed_rule(point: FaultPoint | AdminFaultPoint, batch_id: int) -> FaultRule | None:
    """The rule that fires at `point` for `batch_id` this time, if any (rolls its percent once)."""
    text = os.environ.get(ENV_VAR)
    if not text:
        return None
    rules = [rule for rule in parse_rules(text) if rule.point == point]
    if not rules:
        return None
    roll = _roll()  # only points a rule names draw, so a seed gives the same batches per point
    return next((rule for rule in rules if rule.matches(point, batch_id, roll)), None)


def fault_point(point: FaultPoint | AdminFaultPoint, batch_id: int) -> None:
    """Fire any fault armed for `point` and `batch_id`; a no-op unless LAKEHOUSE_FAULT is set."""
    rule = armed_rule(point, batch_id)
    if rule is not None:
        fire(rule, batch_id)


@contextlib.contextmanager
def fault_during_write(
    point: FaultPoint, batch_id: int, location: Callable[[], str]
) -> Iterator[None]:
    """Fire `point` once the write in the `with` block has put a new data file under `location`.

    `location` is called only when a rule is armed (it may cost a catalog lookup). The table must
    be on the local file system. If the write adds no data file, nothing fires.
    """
    rule = armed_rule(point, batch_id)
    if rule is None:
        yield
        return
    root = _local_path(location())
    before = data_files(root)
    done = threading.Event()

    def watch() -> None:
        while not done.wait(_WATCH_INTERVAL_SECONDS):
            if data_files(root) - before:
                fire(rule, batch_id)
                return

    watcher = threading.Thread(target=watch, name=f"fault-{point}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def data_files(root: Path) -> set[str]:
    """The Parquet data files under a table directory, outside `_delta_log` (relative paths)."""
    found: set[str] = set()
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [d for d in subdirectories if not d.startswith("_delta_log")]
        found.update(
            os.path.relpath(os.path.join(directory, f), root)
            for f in files
            if f.endswith(".parquet")
        )
    return found


def _local_path(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme:
        raise ConfigError(f"fault points that watch a write need a local table, not {location}")
    return Path(location)


def _roll() -> float:
    seed = os.environ.get(SEED_ENV_VAR)
    if seed is None:
        return random.uniform(0, 100)
    return _rolls.setdefault(seed, random.Random(seed)).uniform(0, 100)


def fire(rule: FaultRule, batch_id: int) -> None:
    """Carry out a rule's action now, from whichever thread reached the point."""
    if rule.action == "raise":
        raise InjectedFaultError(f"fault injected at {rule.point} for batch {batch_id}")
    if rule.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if rule.action == "term":
        _term_injected.set()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(_TERM_GRACE_SECONDS)  # a handler someone installed may delay the end
        os._exit(143)
    if rule.action == "stall":
        _stop_own_group()
        return
    os._exit(137)


def record_crash() -> RecordCrash | None:
    """How a marked record crashes its reader in this run, if a test armed it."""
    value = os.environ.get(RECORD_CRASH_ENV)
    if value is None:
        return None
    if value not in get_args(RecordCrash):
        raise ConfigError(
            f"invalid {RECORD_CRASH_ENV} {value!r}: expected one of {get_args(RecordCrash)}"
        )
    return value  # type: ignore[return-value]


def crash_reader(text: str | None, jvm_pid: int | None) -> str | None:
    """In a Python worker: on a marked record, end the worker, or with `jvm_pid` the JVM.

    A killed worker is what a crash in a library looks like; a JVM killed in the middle of a
    task is what a stack overflow or an out-of-memory error in a task does to a local driver.
    """
    if text is None or CRASH_MARKER not in text:
        return None
    if jvm_pid is not None:
        os.kill(jvm_pid, signal.SIGKILL)
        time.sleep(60)
    os._exit(139)


def is_term_injected() -> bool:
    """True once a `term` fault sent this process its SIGTERM.

    A run that stops gracefully on SIGTERM lets this one end the process at once, as the fault
    means a SIGTERM that kills at that very place.
    """
    return _term_injected.is_set()


def _stop_own_group() -> None:
    """SIGSTOP this process's group if it leads one (driver and JVM), else this process."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGSTOP)
    else:
        os.kill(os.getpid(), signal.SIGSTOP)
