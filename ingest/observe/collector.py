"""Python's cycle collector after each batch, so the driver JVM lets go of what Python dropped.

py4j keeps a JVM object alive while Python holds its proxy, and a proxy whose method was called
sits in a reference cycle with that method's object (`JavaObject` <-> `JavaMember`): refcounts
never free it, only Python's cycle collector, whose full pass comes seldom in a process this
size. Until it comes the JVM keeps each batch's Datasets with their plans and encoders: in one
session's available-now runs the live Datasets climbed from 13 to 99 over 20 runs and the JVM's
heap after a full GC from 108 to 166 MiB, then fell back when the pass came; a collection after
each run kept them at 2-30 and the heap at 103-129 MiB (docs/benchmarks.md#a-long-run-make-soak).

After the first batch the objects the process holds for good (modules, the session) are moved
out of the collector's way (`gc.freeze`), once per process, so each later pass scans only what a
batch made: 1-3 ms instead of 38. Freezing is the process's business, so only the CLI, which
owns its process, adds this observer; an application calling `run_pipeline` decides for itself.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from ingest.observe.observer import RunObserver

if TYPE_CHECKING:
    from ingest.commit.batch_result import BatchResult


class CycleCollector(RunObserver):
    """Runs Python's cycle collector after each settled batch; freezes survivors once a process."""

    def __init__(self, freeze: bool = True) -> None:
        self._freeze = freeze
        self.collections = 0

    def settled(self, result: BatchResult) -> None:
        """Collect what this batch left in cycles (its py4j proxies among them)."""
        gc.collect()
        if self._freeze and self.collections == 0 and gc.get_freeze_count() == 0:
            gc.freeze()  # once a process: a later freeze would keep what died in cycles since
        self.collections += 1
