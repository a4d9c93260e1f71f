"""`make bench`: what exactly-once costs, as ratios measured side by side in one Spark session.

Every ratio compares two measurements taken in the same run, on the same data, in the same
session, so machine noise largely cancels. Figures are medians over a few batches after a warm-up,
and the two sides of a ratio take turns batch by batch rather than running one after the other.
Results print as a table (target, measured, met or missed) and go to bench/results/latest.json
(and a timestamped copy) under the ratio names the targets are tracked by.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from devices import measure_start_devices, measure_writer_devices
from object_store import measure_object_store
from pyspark.sql import SparkSession
from records import json_landing_seconds
from report import Report, Stopwatch, console, save, show
from startup import bare_session, first_batch
from workloads import (
    SCHEMA,
    JobCount,
    appender,
    committer,
    counting_compilations,
    counting_jobs,
    files_of,
    fill,
    grow_log,
    in_parallel,
    interleaved,
    interleaved_medians,
    per_batch,
    stream_rounds,
    with_conf,
)

from ingest.commit.batch_result import BatchResult
from quality.check_results import FLUSH_EVERY
from tables.delta.provision import ensure_table
from tables.engine.class_archive import ARCHIVE_ENV
from tables.engine.session import get_spark
from tables.spec import TableSpec

#: Spark's compression of cached columns, off in the embedded session (the batch cache).
CACHE_COMPRESSION = "spark.sql.inMemoryColumnarStorage.compressed"


def main() -> None:
    """Parse sizes, run every measurement, print and save the ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument(
        "--batches", type=int, default=5, help="measured rounds per side of each ratio (median)"
    )
    parser.add_argument(
        "--large-rows",
        type=int,
        default=2_000_000,
        help="rows of the large batch (exactly-once against a plain append; 0: skip)",
    )
    parser.add_argument("--base-rows", type=int, default=200_000)
    parser.add_argument("--log-commits", type=int, default=1000)
    parser.add_argument("--startup-runs", type=int, default=2)
    parser.add_argument("--json-lines", type=int, default=10_000)
    parser.add_argument("--json-line-bytes", type=int, default=4096)
    parser.add_argument(
        "--stream-round",
        type=int,
        default=FLUSH_EVERY,
        help="stream batches per measured round (default: the runner's outcomes cadence)",
    )
    parser.add_argument(
        "--devices",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure each speed device switched off against all on (docs/benchmarks.md)",
    )
    parser.add_argument(
        "--object-store",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure commits on a local S3-API server against the local disk (child processes)",
    )
    parser.add_argument(
        "--devices-only",
        action="store_true",
        help="measure the speed devices alone (the other figures are left out of the report)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument(
        "--label", default="quiet machine", help="conditions of the run, kept in the JSON"
    )
    args = parser.parse_args()
    sizes = {k: str(v) for k, v in vars(args).items()}
    watch = Stopwatch()
    home = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ.setdefault("LAKEHOUSE_SPARK_MASTER", "local[2]")
    # The bench's own JVM runs for minutes: were it to write the class archive, it would hold it
    # from the start-up runs, which are to measure a start with the archive in place.
    os.environ[ARCHIVE_ENV] = "off"
    spark = get_spark(home, app_name="lakehouse-bench")
    master = spark.sparkContext.master or ""
    report = Report()
    counter = iter(range(1, 10**9))

    def spec(
        name: str, schema: str = SCHEMA, keys: tuple[str, ...] = ("event_id",), **kwargs: object
    ) -> TableSpec:
        made = TableSpec(f"{name}_{next(counter)}", schema, keys, **kwargs)  # type: ignore[arg-type]
        ensure_table(spark, made)
        return made

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        _measure(spark, args, spec, report, watch, home)
    except KeyboardInterrupt:
        console.print("[red]interrupted: the figures measured so far are saved[/]")
        report.note("interrupted", True)
    finally:
        show(report, master, sizes, watch)
        save(report, master, sizes, watch, args.out, args.label)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _measure(
    spark: SparkSession,
    args: argparse.Namespace,
    spec: Callable[..., TableSpec],
    report: Report,
    watch: Stopwatch,
    home: Path,
) -> None:
    """Run every measurement in turn, recording each ratio as soon as it is known."""
    b, rows = args.batches, args.batch_rows
    console.print(f"[bold]lakehouse bench[/] batches of {rows} rows, {b} measured per figure")
    warm_paths = {
        "commit": committer(spark, spec("bench_warm_eo"), rows),
        "append": appender(spark, spec("bench_warm_append"), rows, idempotent=False),
        "txn": appender(spark, spec("bench_warm_txn"), rows, idempotent=True),
    }
    for i in range(3):
        for path in warm_paths.values():
            path(i)
    watch.lap("session start and warm-up")
    if args.devices_only:
        measure_writer_devices(spark, spec, rows, args.stream_round, b, report)
        watch.lap("speed devices: stream batch")
        measure_start_devices(home, spark, max(args.startup_runs, 1), report)
        watch.lap("speed devices: start-up")
        return

    # Steady-state stream batches (a round of them, with the outcomes' append), a bare commit,
    # a plain append, Delta's own idempotent append. Round sides are divided by their batches.
    exactly_once, jobs, stream_jobs = spec("bench_eo"), list[JobCount](), list[JobCount]()
    txn_jobs: list[JobCount] = []
    compiled: list[int] = []
    parts: dict[str, list[float]] = {"commit": [], "audit": [], "append of outcomes": []}
    per_round = args.stream_round
    rounds = interleaved(
        {
            "stream": counting_compilations(
                spark,
                stream_rounds(spark, spec("bench_stream"), rows, per_round, parts, stream_jobs),
                compiled,
            ),
            "txn_rounds": per_batch(
                appender(spark, spec("bench_txn_r"), rows, idempotent=True), per_round
            ),
            "exactly_once": counting_jobs(spark, committer(spark, exactly_once, rows), jobs),
            "append": appender(spark, spec("bench_append"), rows, idempotent=False),
            "txn_append": counting_jobs(
                spark, appender(spark, spec("bench_txn"), rows, idempotent=True), txn_jobs
            ),
        },
        b,
    )
    timed = {name: statistics.median(spent) for name, spent in rounds.items()}
    eo = timed["exactly_once"]
    stream = timed["stream"] / per_round
    per_stream_batch = {
        side: [t / per_round for t in rounds[side]] for side in ("stream", "txn_rounds")
    }
    report.ratio(
        "commit_vs_idempotent_append", rounds["exactly_once"], rounds["txn_append"], "<= 1.3"
    )
    report.ratio(
        "stream_batch_vs_idempotent_append",
        per_stream_batch["stream"],
        per_stream_batch["txn_rounds"],
        "<= 1.3",
    )
    # Context, not a target on delta-spark 4.4.0: Delta's idempotent append alone costs about
    # twice a plain append there (delta-io/delta#4708, fixed on master by #6929, backport #7670).
    report.ratio("exactly_once_vs_plain_append", rounds["append"], rounds["exactly_once"])
    report.note(
        "exactly_once_vs_plain_append is context until a Delta release carries the fix of",
        "delta-io/delta#4708 (backport PR delta-io/delta#7670)",
    )
    commit_s = statistics.median(parts["commit"][per_round:])
    # The record is one append per round (within the batch that fills the buffer, or after the
    # round): the audit's share is a mean over the measured batches, which a median would miss.
    after = parts["audit"][per_round:]
    audit_s = (sum(after) + sum(parts["append of outcomes"][1:])) / len(after)
    settle_s = statistics.median(after)
    record_s = audit_s - settle_s
    report.ratio("audit_vs_commit", audit_s, commit_s, "<= 0.25")
    report.note(
        "spark_jobs_per_committed_batch (goal <= 2)",
        statistics.median(j.total for j in stream_jobs[1:]) / per_round,
    )
    report.note(
        "spark jobs per committed batch: Delta's state rebuild for its marker check "
        "(delta-io/delta#4708; started after the batch before it), the rest",
        [
            statistics.median(j.state_rebuilds for j in stream_jobs[1:]) / per_round,
            statistics.median(j.total - j.state_rebuilds for j in stream_jobs[1:]) / per_round,
        ],
    )
    report.note("spark_jobs_per_bare_commit", statistics.median(j.total for j in jobs[1:]))
    report.note(
        "spark_jobs_per_idempotent_append", statistics.median(j.total for j in txn_jobs[1:])
    )
    # With Spark's default of 100 compiled classes kept, a batch compiled its plans again each
    # time (spark.sql.codegen.cache.maxEntries in tables/engine/session.py).
    report.note("code_compilations_per_stream_batch", statistics.median(compiled[1:]) / per_round)
    report.note(
        "seconds: commit, plain append, idempotent append, stream batch (commit + audit + "
        "outcomes' append, per batch)",
        [round(v, 3) for v in (eo, timed["append"], timed["txn_append"], stream)],
    )
    report.note(
        "stream batch, seconds per stage: commit, audit settled, outcomes' append share",
        [
            round(commit_s, 3),
            round(settle_s, 3),
            round(record_s, 3),
        ],
    )
    watch.lap("per-batch cost")

    if args.devices:
        measure_writer_devices(spark, spec, rows, per_round, b, report)
        watch.lap("speed devices: stream batch")

    # A re-run of the last committed batch: no commit, no file, its content checked.
    before = files_of(spark, exactly_once)
    rerun = committer(spark, exactly_once, rows)
    skipped = interleaved_medians({"skip": lambda _: _skipped(rerun(b))}, b)["skip"]
    assert files_of(spark, exactly_once) == before, "a skipped batch changed the table"
    report.ratio("skip_vs_commit", skipped, eo, "<= 0.05")
    watch.lap("skip")

    big_paths = {
        "exactly_once": committer(spark, spec("bench_eo_big"), 10 * rows),
        "append": appender(spark, spec("bench_append_big"), 10 * rows, idempotent=False),
    }
    big = interleaved_medians(big_paths, b)
    report.ratio("exactly_once_vs_plain_append_10x", big["append"], big["exactly_once"], ">= 0.8")
    watch.lap("10x batch")

    if args.large_rows > 0:
        large = interleaved(
            {
                "exactly_once": committer(spark, spec("bench_eo_large"), args.large_rows),
                # The batch cache compressed, as Spark does by default (benchmarks.md#batch-cache).
                "compressed_cache": with_conf(
                    spark,
                    CACHE_COMPRESSION,
                    "true",
                    committer(spark, spec("bench_eo_large_z"), args.large_rows),
                ),
                "append": appender(
                    spark, spec("bench_append_large"), args.large_rows, idempotent=False
                ),
            },
            b,
        )
        report.ratio(
            "large_batch_vs_plain_append", large["exactly_once"], large["append"], "<= 1.5"
        )
        report.ratio(
            "batch_cache_compressed_vs_not", large["compressed_cache"], large["exactly_once"]
        )
        watch.lap(f"large batch ({args.large_rows:,} rows)")

    base_rows = args.base_rows
    sized = {size: spec(f"bench_size_{size}") for size in (base_rows, 10 * base_rows)}
    in_parallel(
        [
            lambda t=t, n=n: fill(spark, t, n, chunk=max(rows * 5, n // 10), days=100)  # type: ignore[misc]
            for n, t in sized.items()
        ]
    )
    watch.lap("fill the table-size tables")
    by_size = interleaved_medians(
        {str(n): committer(spark, t, rows, 50_000_000, days=99) for n, t in sized.items()}, b
    )
    report.ratio("table_10x_vs_1x", by_size[str(10 * base_rows)], by_size[str(base_rows)], "<= 1.2")
    watch.lap("table size: commits")

    short_log, long_log = spec("bench_log_short"), spec("bench_log_long")
    grow_log(spark, short_log, 10)
    grow_log(spark, long_log, args.log_commits)
    watch.lap(f"grow the logs to 10 and {args.log_commits} commits")
    logs = interleaved_medians(
        {
            "short": committer(spark, short_log, rows, 91_000_000),
            "long": committer(spark, long_log, rows, 91_000_000),
        },
        b,
    )
    report.ratio("log_1000_vs_10", logs["long"], logs["short"], "<= 1.2")
    watch.lap("log length: commits")

    if args.startup_runs > 0:
        reached: dict[str, list[float]] = {"ingest": [], "bare": []}
        whole = interleaved_medians(
            {
                "ingest": first_batch(home, spark, reached["ingest"]),
                "bare": bare_session(home, reached["bare"]),
            },
            args.startup_runs,
        )
        # The first of each list is the warm-up run's.
        ingest, bare = (statistics.median(reached[side][1:]) for side in ("ingest", "bare"))
        report.ratio("start_to_first_batch_vs_session", ingest, bare, "<= 1.5")
        report.note(
            "start-up, whole processes to their exit: ingest, bare session, ratio",
            [
                round(whole["ingest"], 2),
                round(whole["bare"], 2),
                round(whole["ingest"] / whole["bare"], 3),
            ],
        )
        watch.lap("start-up")
        if args.devices:
            measure_start_devices(home, spark, args.startup_runs, report)
            watch.lap("speed devices: start-up")

    exact, plain, size = json_landing_seconds(
        spark, home, spec, args.json_lines, args.json_line_bytes, b
    )
    report.ratio("json_landed_vs_spark_reader", plain, exact, ">= 0.5")
    report.note(
        "JSON landed, MB/s: exact reader + exactly-once commit, Spark's JSON reader + append",
        [round(size / 1e6 / exact, 1), round(size / 1e6 / plain, 1)],
    )
    watch.lap("JSON landed per second")

    if args.object_store:
        measure_object_store(report, rows, min(per_round, 10))
        watch.lap("object store: S3 against the local disk")

    _delta_rs_context(report, home, rows, b)


def _skipped(result: object) -> object:
    if not isinstance(result, BatchResult) or result.status != "skipped":
        raise RuntimeError(f"expected a skip, got {result}")
    return result


def _delta_rs_context(report: Report, home: Path, rows: int, runs: int) -> None:
    """delta-rs's exactly-once MERGE of the same batch shape, if `deltalake` is installed."""
    try:
        from delta_rs import merge_seconds
    except ImportError:
        report.note("delta-rs exactly-once MERGE", "not measured (pip install deltalake)")
        return
    probe, merge = merge_seconds(home / "delta_rs", rows, runs)
    report.note("delta-rs: exactly-once MERGE with txn marker, s per batch", round(merge, 4))
    report.note("delta-rs: marker probe, s", round(probe, 4))


if __name__ == "__main__":
    main()
