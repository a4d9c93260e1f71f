"""The speed devices, each measured switched off against all on: what each one saves.

A device earns its place by saving at least 5 % of the figure it exists for; each is measured
A/B on that figure in one run, the variants taking turns (`interleaved_medians`):
- the writer's devices (`tables.delta.writer.SpeedDevices`: known key range, blind append above
  the high-water mark, kept session clones, a small batch in one task) on a stream batch, as
  `stream_rounds` runs it;
- the next batch's state rebuilt after a commit (`next_state`) on a stream batch that comes
  after idle time, as a stream with a trigger interval longer than its batches runs it
  (`paced.py`): back to back, there is no time between batches for it to use;
- the class archive (`LAKEHOUSE_CLASS_ARCHIVE=off`) on a new `lakehouse ingest` process's first
  committed batch (the run-start prefetch, measured the same way, missed twice and went).
Each is recorded as the ratio `device_<name>_off_vs_on` (target >= 1.05: 5 % saved).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from paced import measure_paced
from pyspark.sql import SparkSession
from report import Report
from startup import first_batch
from workloads import interleaved_medians, stream_rounds

from tables.delta.writer import SpeedDevices
from tables.engine.class_archive import ARCHIVE_ENV
from tables.spec import TableSpec

#: Off by the device's share of its figure: the figure without it over the figure with it.
EARNS_ITS_PLACE = ">= 1.05"
WRITER_DEVICES = {
    "key_range": SpeedDevices(key_range=False),
    "blind_append": SpeedDevices(blind_append=False),
    "kept_clones": SpeedDevices(kept_clones=False),
    "one_task": SpeedDevices(one_task=False),
}
START_DEVICES = {"class_archive": {ARCHIVE_ENV: "off"}}
#: Paced batches per round: each round idles 10 x `paced.IDLE_SECONDS`, left out of its figures.
PACED_ROUND = 10


def measure_writer_devices(
    spark: SparkSession,
    spec: Callable[[str], TableSpec],
    rows: int,
    per_round: int,
    runs: int,
    report: Report,
) -> None:
    """A stream batch with all devices on against one with each device off, in turns."""
    variants = {"on": SpeedDevices(), **WRITER_DEVICES}
    actions = {
        name: stream_rounds(
            spark, spec(f"bench_device_{name}"), rows, per_round, _parts(), [], devices
        )
        for name, devices in variants.items()
    }
    timed = interleaved_medians(actions, runs)
    for name in WRITER_DEVICES:
        report.ratio(
            f"device_{name}_off_vs_on",
            timed[name] / per_round,
            timed["on"] / per_round,
            EARNS_ITS_PLACE,
        )
    measure_paced(spark, spec, rows, PACED_ROUND, runs, report, EARNS_ITS_PLACE)


def measure_start_devices(root: Path, spark: SparkSession, runs: int, report: Report) -> None:
    """A new process's first committed batch with all devices on against each one off."""
    reached: dict[str, list[float]] = {name: [] for name in ("on", *START_DEVICES)}
    actions = {"on": first_batch(root, spark, reached["on"])}
    for name, switches in START_DEVICES.items():
        actions[name] = first_batch(root, spark, reached[name], switches)
    interleaved_medians(actions, runs)
    # The first of each list is the warm-up run's.
    on = statistics.median(reached["on"][1:])
    for name in START_DEVICES:
        off = statistics.median(reached[name][1:])
        report.ratio(f"device_{name}_off_vs_on", off, on, EARNS_ITS_PLACE)


def _parts() -> dict[str, list[float]]:
    return {"commit": [], "audit": [], "append of outcomes": []}
