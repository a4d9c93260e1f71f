"""The harness: runs the matrix step by step, saving its progress; checks the tables at the end."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from crash_matrix.kills import Timing, choose_kill
from crash_matrix.plan import (
    APP_ID,
    CONFIG,
    EXPECTED_EXIT,
    KEY,
    QUARANTINE,
    RAW_COLUMN,
    STATE_FILE,
    TABLE,
    Figures,
    append_ledger,
    compare,
    file_name,
    plan_files,
    read_ledger_file,
)
from crash_matrix.processes import INTERRUPTS, Run, count_entries, progress, stop_stray_run
from tables.errors import first_line
from tables.faults import ENV_VAR


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
        harness.landed = count_entries(harness.landing)
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
        commits = count_entries(self.checkpoint / "commits", digits=True)
        logs = [self.home / "warehouse" / t / "_delta_log" for t in (TABLE, QUARANTINE)]
        return commits, commits + count_entries(self.checkpoint / "offsets") + sum(
            map(count_entries, logs)
        )

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
        from tables.delta.history import read_ledger
        from tables.delta.markers import committed_batch
        from tables.delta.table import require_table
        from tables.engine.session import get_spark

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
