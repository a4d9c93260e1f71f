"""Python's cycle collector between batches, so the driver JVM lets go of what Python dropped.

py4j keeps a JVM object alive while Python holds its proxy, and a proxy whose method was called
sits in a reference cycle with that method's object (`JavaObject` <-> `JavaMember`): refcounts
never free it, only Python's cycle collector, whose full pass comes seldom in a process this
size. Until it comes the JVM keeps each batch's Datasets with their plans and encoders: in one
session's available-now runs the live Datasets climbed from 13 to 99 over 20 runs and the JVM's
heap after a full GC from 108 to 166 MiB, then fell back when the pass came; a collection after
each run kept them at 2-30 and the heap at 103-129 MiB (docs/benchmarks.md#a-long-run-make-soak).

A full pass over everything the process holds costs about 38 ms here. Where the process is the
CLI's own (the `lakehouse` console script), the objects it holds for good (modules, the session)
are moved out of the collector's way after the first batch (`gc.freeze`), so each later pass
scans only what a batch made: 1-3 ms, after every batch. Elsewhere (an application calling
`run_pipeline`, a test runner invoking the CLI in its own process) freezing is not ours to do,
and the collector runs every `UNFROZEN_EVERY` batches instead: the heap then holds at most that
many batches' Datasets, and a batch pays a tenth of a pass.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from ingest.observe.observer import RunObserver

if TYPE_CHECKING:
    from ingest.commit.batch_result import BatchResult

#: Batches between two passes where the process's objects are not frozen.
UNFROZEN_EVERY = 10


def should_collect(settled_before: int, frozen: bool) -> bool:
    """Whether the batch after `settled_before` settled ones ends with a pass of the collector.

    The first batch always does (it is when a frozen run freezes); then each batch when this
    run froze the process's objects, every `UNFROZEN_EVERY`-th otherwise.
    """
    return frozen or settled_before % UNFROZEN_EVERY == 0


class CycleCollector(RunObserver):
    """Runs Python's cycle collector after settled batches; freezes survivors once, if it may.

    `owns_process`: the process is this run's alone (the console script), so it may freeze.
    """

    def __init__(self, owns_process: bool = False) -> None:
        self._may_freeze = owns_process
        self.frozen = False
        self.settled_batches = 0
        self.collections = 0

    def settled(self, result: BatchResult) -> None:
        """Collect what the last batches left in cycles (their py4j proxies among them)."""
        if should_collect(self.settled_batches, self.frozen):
            gc.collect()
            self.collections += 1
            if self._may_freeze and self.collections == 1:
                # Once, after the first batch: a later freeze would keep for good what died in
                # cycles since. A process another freeze reached is left as it is.
                self.frozen = gc.get_freeze_count() == 0
                if self.frozen:
                    gc.freeze()
        self.settled_batches += 1
