"""Where a batch's time goes: seconds per named stage, measured where the work happens.

The commit measures its own stages (`prepare`, `quarantine`, `audit`, `write`); the stream runner
adds the whole commit, the audit's settling after it and the outcomes' append, so a batch's
record (`<home>/logs/batches.jsonl`, the metrics) says which stage a slow batch spent its time in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager


class Stopwatch:
    """Seconds spent per named stage; a stage entered twice adds up."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Measure the block as stage `name` (also when it raises)."""
        started = self._clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self._clock() - started


def settled_timings(
    commit_stages: Mapping[str, float],
    started: float,
    committed: float,
    settled: float,
    appended: float,
) -> dict[str, float]:
    """A stream batch's stages: the commit's own, then `commit`, `audit_settle`, `outcomes_append`.

    `started`, `committed` and `settled` are clock readings around the commit and the audit's
    settling; `appended` is the part of the settling spent appending outcomes to
    `lakehouse_quality` (most batches: none, the append is in bulk). `batch` is the whole.
    """
    return {
        **commit_stages,
        "commit": committed - started,
        "audit_settle": max(0.0, settled - committed - appended),
        "outcomes_append": appended,
        "batch": settled - started,
    }
