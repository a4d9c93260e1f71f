"""Stream batches with idle time between them: a trigger interval longer than a batch takes.

A production stream is rarely busy back to back: with a trigger every few seconds and batches
that take under a second, it idles between batches, and what its users see is each batch's
latency, from its start to its audit settled. Work done in the idle time (the state rebuild a
commit starts for the next one, `tables.delta.state_rebuild.NextStateRebuild`; the runner's
outcome appends) leaves that latency; `make bench`'s back-to-back rounds cannot show it, as
the next batch starts at once. Here each batch is timed alone and the idle time between
batches is left out of every figure.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession
from report import Report
from workloads import Action, batch, delta_append, interleaved, stream_batch

from ingest.outcomes import outcomes_of
from tables.delta.writer import SpeedDevices, TableWriter
from tables.spec import TableSpec

#: Seconds between batches: longer than Delta's state rebuild of a small table takes here.
IDLE_SECONDS = 0.5


def paced(
    one: Callable[[int], None],
    per_round: int,
    latencies: list[float],
    end: Callable[[], None] = lambda: None,
    idle: float = IDLE_SECONDS,
) -> Action:
    """A round of `per_round` batches (`one(n)`), `idle` seconds apart; each batch's seconds
    go to `latencies`, then `end` runs (outside them: the round's own upkeep)."""
    counter = iter(range(10**9))

    def run(_: int) -> object:
        for _ in range(per_round):
            started = time.perf_counter()
            one(next(counter))
            latencies.append(time.perf_counter() - started)
            time.sleep(idle)
        end()
        return None

    return run


def paced_stream(
    spark: SparkSession,
    table: TableSpec,
    rows: int,
    per_round: int,
    latencies: list[float],
    devices: SpeedDevices | None = None,
) -> Action:
    """Stream batches as the runner commits them (commit, the next state's rebuild started,
    audit settled, outcome buffered), idle between them; the outcomes' append and the last
    rebuild at the round's end, as the runner does them between batches."""
    outcomes = outcomes_of(spark, table, "s")
    writer = TableWriter(spark, table, "s", devices=devices or SpeedDevices())

    def one(n: int) -> None:
        stream_batch(writer, n, batch(spark, 90_000_000 + n * rows, rows), outcomes)

    def end() -> None:
        outcomes.flush()
        writer.next_state.close()

    return paced(one, per_round, latencies, end)


def paced_appends(
    spark: SparkSession, table: TableSpec, rows: int, per_round: int, latencies: list[float]
) -> Action:
    """Delta's own idempotent append of the same batches, idle between them."""

    def one(n: int) -> None:
        delta_append(batch(spark, n * rows, rows), table.name, "t", n, idempotent=True)

    return paced(one, per_round, latencies)


def measure_paced(
    spark: SparkSession,
    spec: Callable[[str], TableSpec],
    rows: int,
    per_round: int,
    runs: int,
    report: Report,
    earns_its_place: str,
) -> None:
    """A paced stream batch with every device on, without the next state's rebuild, and
    Delta's own idempotent append, taking turns; each side's batches after its warm-up round."""
    latencies: dict[str, list[float]] = {"on": [], "off": [], "txn": []}
    interleaved(
        {
            "on": paced_stream(spark, spec("bench_paced_on"), rows, per_round, latencies["on"]),
            "off": paced_stream(
                spark,
                spec("bench_paced_off"),
                rows,
                per_round,
                latencies["off"],
                SpeedDevices(next_state=False),
            ),
            "txn": paced_appends(spark, spec("bench_paced_txn"), rows, per_round, latencies["txn"]),
        },
        runs,
    )
    on, off, txn = (latencies[side][per_round:] for side in ("on", "off", "txn"))
    report.ratio("device_next_state_off_vs_on", off, on, earns_its_place)
    report.ratio("paced_stream_batch_vs_idempotent_append", on, txn)
    report.note("paced_batches_idle_seconds", IDLE_SECONDS)
