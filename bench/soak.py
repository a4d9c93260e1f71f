"""`make soak`: one continuous ingest for thousands of batches; does it stay as fast and as small?

One `lakehouse ingest --trigger "1 second"` process runs on a project of its own; this process
drops one small JSON file each time a batch settles and samples every batch: seconds by stage
(`<home>/logs/batches.jsonl`), Python and JVM RSS, descriptors, threads, `_delta_log` files,
checkpoint bytes; every `--heap-every` batches the JVM's live heap (after a full GC, taken
before the next file is dropped and after the batch's upkeep: no batch or OPTIMIZE in flight),
with the compiled classes it holds. At a tenth
of the run and at its end: threads by name and the seconds of `lakehouse status` and `verify`.
Each ratio compares the end with the start against its goal (issue 36; docs/benchmarks.md).
Writes `bench/results/soak.json` and `soak.png`. Not in CI: 3,000 batches take 1.5-2 hours
here (tests/test_soak.py runs 300 in the slow tier).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib import pyplot  # without a display it draws with Agg, into files only
from probes import driver_jvm, live_heap, status_field, thread_names, tree_size

from tables.maintenance_policy import is_every_nth

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
ROWS_PER_FILE = 50
_PARENT_SPARK = frozenset(
    {"SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"}
)
GOALS = {
    "latency_late_vs_early": 1.2,
    "heap_late_vs_early": 1.2,
    "rss_late_vs_early": 1.2,
    "fds_late_vs_early": 1.2,
    "threads_late_vs_early": 1.2,
    "status_late_vs_early": 1.5,
    "verify_late_vs_early": 1.5,
}


@dataclass
class Sample:
    """What one settled batch cost, and how big the run was after it."""

    batch_id: int
    seconds: float
    stages: dict[str, float]
    python_rss_mb: float
    jvm_rss_mb: float
    fds: int
    threads: int
    delta_log_files: int
    checkpoint_bytes: int
    landing_files: int
    """Files in the landing directory, which the stream lists every trigger."""
    heap_after_gc_mb: float | None = None
    generated_classes: int | None = None
    """Compiled classes the driver still holds (`probes.live_heap`)."""


def project(root: Path, optimize_every: int, archive: bool = False) -> None:
    """A project with one JSON landing directory into `events` (home `.lakehouse`).

    With `archive`, each read file is moved under `archive/` once its batch is checkpointed.
    """
    (root / "landing").mkdir(parents=True)
    upkeep = f"optimize_every = {optimize_every}\n" if optimize_every else ""
    maintenance = f"[tables.events.maintenance]\n{upkeep}" if upkeep else ""
    cleaning = 'clean_source = "archive"\narchive_dir = "archive"\n' if archive else ""
    (root / "lakehouse.toml").write_text(
        '[lakehouse]\nhome = ".lakehouse"\n\n'
        '[tables.events]\nschema = "event_id STRING NOT NULL, amount DOUBLE"\n'
        'keys = ["event_id"]\n' + maintenance + "\n"
        '[pipelines.events]\ntable = "events"\napp_id = "soak"\n'
        '[pipelines.events.source]\nformat = "json"\npath = "landing"\nmax_files_per_trigger = 1\n'
        + cleaning
    )


def event_id(n: int, i: int, ordered: bool) -> str:
    """Row `i` of file `n`'s key: zero-padded (text order is arrival order) or not (`e1000-0`)."""
    return f"e{n:08d}-{i:03d}" if ordered else f"e{n}-{i}"


def drop(landing: Path, n: int, ordered: bool = True) -> None:
    """Land file `n` atomically: ROWS_PER_FILE new events."""
    text = "".join(
        json.dumps({"event_id": event_id(n, i, ordered), "amount": float(i)}) + "\n"
        for i in range(ROWS_PER_FILE)
    )
    staging = landing / f".{n:06d}.tmp"
    staging.write_text(text)
    staging.rename(landing / f"{n:06d}.json")


def lakehouse(root: Path, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start `lakehouse ARGS` in the project, as a driver of its own: without the variables
    that tie a process to a parent's Spark (a Spark Connect mode a caller's session left in its
    environment, a py4j gateway)."""
    env = {k: v for k, v in os.environ.items() if k not in _PARENT_SPARK}
    return subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", *args], cwd=root, text=True, env=env, **kwargs
    )


def timed(root: Path, *args: str) -> float:
    """Seconds one `lakehouse` command takes (a JVM start included), failing if it fails."""
    started = time.monotonic()
    done = lakehouse(root, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = done.communicate(timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"lakehouse {' '.join(args)} failed: {err[-2000:] or out[-2000:]}")
    return time.monotonic() - started


def assert_running(ingest: subprocess.Popen[str]) -> None:
    """Raise if the ingest process has ended (a wait for its output would never end)."""
    if ingest.poll() is not None:
        raise RuntimeError(f"the ingest process ended (exit {ingest.returncode}): see its log")


def settled_batches(log: Path, ingest: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    """The batch log's lines as they are appended (waits for each while `ingest` runs)."""
    while not log.exists():
        assert_running(ingest)
        time.sleep(0.2)
    # A read can meet a line while it is written (one `write` is atomic against other writers,
    # not against a reader): a piece without its newline waits for the rest. A 3,000-batch run
    # died at batch 1,032 parsing a line's second half as a whole one.
    pending = ""
    with open(log) as lines:
        while True:
            pending += lines.readline()
            if pending.endswith("\n"):
                line, pending = pending, ""
                yield json.loads(line)
            else:
                assert_running(ingest)
                time.sleep(0.05)


def wait_for_upkeep(log: Path, batch_id: int, ingest: subprocess.Popen[str]) -> None:
    """Wait until the ingest says the upkeep after `batch_id` is done (its output's line).

    A heap sample taken while an OPTIMIZE runs measures the OPTIMIZE: batch 3,000's was 217 MiB
    against 148 at batch 2,900 (2026-12-06), the every-500th samples 10-15 MiB above their
    neighbours."""
    said = f"maintenance after batch {batch_id}:"
    deadline = time.monotonic() + 1800
    while said not in log.read_text(errors="replace"):
        assert_running(ingest)
        if time.monotonic() > deadline:
            raise RuntimeError(f"no upkeep after batch {batch_id} within 30 minutes: see its log")
        time.sleep(0.2)


def window(samples: list[Sample], first: int, last: int) -> list[float]:
    """Batch seconds of batch ids first..last (inclusive)."""
    return [s.seconds for s in samples if first <= s.batch_id <= last]


def ratio(name: str, late: float, early: float) -> dict[str, Any]:
    """One figure against its goal, as `bench/results` keeps them."""
    value = round(late / early, 3) if early > 0 else float("nan")
    return {
        "name": name,
        "value": value,
        "target": f"<= {GOALS[name]}",
        "met": value <= GOALS[name],
    }


@dataclass(frozen=True)
class Plan:
    """What one soak runs: how many batches, what it samples when, and how it is driven."""

    batches: int
    heap_every: int
    optimize_every: int
    early_at: int
    """The early figures' batch (late ones are after the last)."""
    trigger: str = "1 second"
    commands: bool = True
    """Time `lakehouse status` and `verify` at the early and the last batch."""
    ordered_keys: bool = True
    """Time-ordered keys, or keys whose text order is not their arrival order (DESIGN's limits)."""
    archive: bool = False
    """Read files archived once their batch is checkpointed (`clean_source`)."""


def soak(plan: Plan, root: Path) -> dict[str, Any]:
    """Run the soak in `root`; the report."""
    batches, heap_every, early_at = plan.batches, plan.heap_every, plan.early_at
    project(root, plan.optimize_every, plan.archive)
    home = root / ".lakehouse"
    output = open(root / "ingest.log", "w")  # noqa: SIM115 - the child's; closed below
    ingest = lakehouse(
        root, "ingest", "events", "--trigger", plan.trigger, stdout=output, stderr=output
    )
    samples: list[Sample] = []
    timings: dict[int, dict[str, float]] = {}
    threads: dict[int, dict[str, dict[str, int]]] = {}
    classes: dict[int, dict[str, float]] = {}
    try:
        drop(root / "landing", 0, plan.ordered_keys)
        for record in settled_batches(home / "logs" / "batches.jsonl", ingest):
            batch_id = int(record["batch_id"])
            if record["status"] == "failed":
                raise RuntimeError(f"batch {batch_id} failed: {record.get('error')}")
            jvm = driver_jvm(ingest.pid)
            heap_due = (batch_id + 1) % heap_every == 0 or batch_id + 1 in (early_at, batches)
            # The heap is measured with no batch in flight (the next file is not there yet) and
            # no upkeep: what the process keeps, not what a batch or an OPTIMIZE holds.
            if heap_due and is_every_nth(batch_id, plan.optimize_every):
                wait_for_upkeep(root / "ingest.log", batch_id, ingest)
            live = live_heap(jvm) if heap_due else None
            if batch_id + 1 < batches:
                drop(root / "landing", batch_id + 1, plan.ordered_keys)
            sample = Sample(
                batch_id=batch_id,
                seconds=float(record["seconds"]["batch"]),
                stages={k: float(v) for k, v in record["seconds"].items()},
                python_rss_mb=status_field(ingest.pid, "VmRSS") / 1024,
                jvm_rss_mb=status_field(jvm, "VmRSS") / 1024,
                fds=len(os.listdir(f"/proc/{jvm}/fd")) + len(os.listdir(f"/proc/{ingest.pid}/fd")),
                threads=status_field(jvm, "Threads") + status_field(ingest.pid, "Threads"),
                delta_log_files=len(os.listdir(home / "warehouse" / "events" / "_delta_log")),
                checkpoint_bytes=tree_size(home / "checkpoints"),
                landing_files=len(os.listdir(root / "landing")),
            )
            if live is not None:
                sample.heap_after_gc_mb, sample.generated_classes = live.mib, live.generated_classes
                if batch_id + 1 in (early_at, batches):
                    classes[batch_id + 1] = live.largest
            samples.append(sample)
            if batch_id + 1 in (early_at, batches):
                named = {"jvm": thread_names(jvm), "python": thread_names(ingest.pid)}
                threads[batch_id + 1] = named
                if plan.commands:
                    timings[batch_id + 1] = {
                        "status": timed(root, "status", "events", "--format", "json"),
                        "verify": timed(root, "verify", "events"),
                    }
            print(f"batch {batch_id}: {sample.seconds:.3f} s", flush=True)
            if batch_id + 1 >= batches:
                break
    finally:
        ingest.terminate()
        try:
            ingest.wait(120)
        except subprocess.TimeoutExpired:
            ingest.kill()
            ingest.wait()
        output.close()
    by_id = {s.batch_id: s for s in samples}
    early, late = by_id[early_at - 1], by_id[batches - 1]
    first = window(samples, early_at // 3, early_at - 1)
    last = window(samples, batches - batches // 15, batches - 1)
    ratios = [
        ratio("latency_late_vs_early", statistics.median(last), statistics.median(first)),
        ratio("heap_late_vs_early", late.heap_after_gc_mb or 0, early.heap_after_gc_mb or 0),
        ratio("rss_late_vs_early", late.python_rss_mb, early.python_rss_mb),
        ratio("fds_late_vs_early", late.fds, early.fds),
        ratio("threads_late_vs_early", late.threads, early.threads),
    ]
    if plan.commands:
        ratios += [
            ratio(f"{name}_late_vs_early", timings[batches][name], timings[early_at][name])
            for name in ("status", "verify")
        ]
    return {
        "batches": batches,
        "optimize_every": plan.optimize_every,
        "trigger": plan.trigger,
        "ordered_keys": plan.ordered_keys,
        "archive": plan.archive,
        "ratios": ratios,
        "timings": {str(k): v for k, v in timings.items()},
        "threads": {str(k): v for k, v in threads.items()},
        "largest_classes_mb": {str(k): v for k, v in classes.items()},
        "generated_classes": {str(n): by_id[n - 1].generated_classes for n in (early_at, batches)},
        "samples": [asdict(s) for s in samples],
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Latency and memory over the batches, as docs/benchmarks.md shows them."""
    samples = report["samples"]
    ids = [s["batch_id"] for s in samples]
    figure, (latency, memory) = pyplot.subplots(2, 1, figsize=(9, 6), sharex=True)
    latency.plot(ids, [s["seconds"] for s in samples], linewidth=0.5, label="batch seconds")
    latency.set_ylabel("seconds")
    latency.legend(loc="upper left")
    memory.plot(ids, [s["python_rss_mb"] for s in samples], label="Python RSS")
    memory.plot(ids, [s["jvm_rss_mb"] for s in samples], label="JVM RSS")
    heap = [(s["batch_id"], s["heap_after_gc_mb"]) for s in samples if s["heap_after_gc_mb"]]
    memory.plot([h[0] for h in heap], [h[1] for h in heap], "o-", label="JVM heap after GC")
    memory.set_ylabel("MiB")
    memory.set_xlabel("batch")
    memory.legend(loc="upper left")
    figure.suptitle(f"soak: {report['batches']} batches of {ROWS_PER_FILE} rows, one process")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3000, help="batches to run (>= 30)")
    parser.add_argument("--heap-every", type=int, default=0, help="heap sample every N batches")
    parser.add_argument("--optimize-every", type=int, default=500, help="0: no maintenance")
    parser.add_argument(
        "--early-at", type=int, default=0, help="the early figures' batch (default: a tenth)"
    )
    parser.add_argument("--trigger", default="1 second", help="the ingest's --trigger")
    parser.add_argument(
        "--no-commands",
        action="store_true",
        help="do not time status and verify (the slow tier's run asserts only on growth)",
    )
    keys_help = "keys whose text order is not their arrival order (e1000-0 < e99-9)"
    parser.add_argument("--unordered-keys", action="store_true", help=keys_help)
    parser.add_argument(
        "--archive", action="store_true", help='clean_source = "archive": read files moved away'
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    arguments = parser.parse_args(argv)
    if arguments.batches < 30:
        parser.error("--batches must be at least 30")
    if not 0 <= arguments.early_at < arguments.batches:
        parser.error("--early-at must be below --batches")
    heap_every = arguments.heap_every or max(1, arguments.batches // 30)
    root = Path(tempfile.mkdtemp(prefix="lakehouse-soak-"))
    try:
        plan = Plan(
            batches=arguments.batches,
            heap_every=heap_every,
            optimize_every=arguments.optimize_every,
            early_at=arguments.early_at or max(1, arguments.batches // 10),
            trigger=arguments.trigger,
            commands=not arguments.no_commands,
            ordered_keys=not arguments.unordered_keys,
            archive=arguments.archive,
        )
        report = soak(plan, root)
    except BaseException:
        # The ingest process's own words go with the run's directory: show their end first.
        log = root / "ingest.log"
        if log.exists():
            print(f"the ingest log ends:\n{log.read_text()[-4000:]}", file=sys.stderr)
        raise
    finally:
        shutil.rmtree(root, ignore_errors=True)
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, arguments.out.with_suffix(".png"))
    for figure in report["ratios"]:
        print(f"{figure['name']}: {figure['value']} (goal {figure['target']})")
    return 0 if all(f["met"] for f in report["ratios"]) else 1


if __name__ == "__main__":
    sys.exit(main())
