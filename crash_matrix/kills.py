"""Where and how the crash matrix kills a run: fault points, crash actions, random kill times."""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from crash_matrix.plan import CRASH_ACTIONS, QUICK_POINTS, STARTUP_KILL_SHARE


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
