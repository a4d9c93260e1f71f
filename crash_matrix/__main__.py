"""`python -m crash_matrix` (`make verify`): parse the sizes, run or resume, print one line."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import crash_matrix
from crash_matrix.harness import Harness
from crash_matrix.kills import crash_actions, fault_cases
from crash_matrix.plan import FULL, QUICK, SIZES, STATE_FILE, summary_line
from crash_matrix.processes import INTERRUPTS, progress
from tables.faults import FaultAction, FaultPoint

PACKAGE_DOC = crash_matrix.__doc__


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options; `--quick` changes only the defaults of the sizes."""
    parser = argparse.ArgumentParser(prog="python -m crash_matrix", description=PACKAGE_DOC)
    parser.add_argument(
        "--quick", action="store_true", help="CI preset (1,200 records, 3 fault points, 2 kills)"
    )
    parser.add_argument("--records", type=int, help="distinct records (default 100,000)")
    parser.add_argument("--batch-size", type=int, help="records per file/batch (default 750)")
    parser.add_argument("--random-kills", type=int, help="random kills (default 200)")
    parser.add_argument("--seed", type=int, help="seed of the input and the kills (default 1)")
    parser.add_argument("--workdir", type=Path, help="empty or new directory (kept)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--run-timeout", type=float, help="seconds per run (default 1800)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with the stopped verification in --workdir, with its saved sizes",
    )
    args = parser.parse_args(argv)
    if args.resume:
        if args.workdir is None:
            parser.error("--resume needs the --workdir of the verification to go on with")
        given = [n for n in (*SIZES, "run_timeout") if getattr(args, n) is not None]
        if given or args.quick:
            parser.error(
                "--resume takes the sizes saved in --workdir; drop "
                + ", ".join(
                    f"--{n.replace('_', '-')}" for n in [*given, *(["quick"] if args.quick else [])]
                )
            )
        return args
    preset = {**(QUICK if args.quick else FULL), "seed": 1, "run_timeout": 1800.0}
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.records < 1 or args.batch_size < 1:
        parser.error("--records and --batch-size must be at least 1")
    if args.random_kills < 0 or args.run_timeout <= 0:
        parser.error("--random-kills must be 0 or more and --run-timeout above 0")
    return args


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The options a verification keeps for its whole life (saved for `--resume`)."""
    return {name: getattr(args, name) for name in (*SIZES, "quick", "run_timeout")}


def start_harness(args: argparse.Namespace) -> Harness | str:
    """A new harness in a new or empty work directory, or the saved one (`--resume`); or why not."""
    if args.resume:
        if not (args.workdir / STATE_FILE).exists():
            return f"--workdir {args.workdir} holds no verification to resume ({STATE_FILE})"
        return Harness.resume(args.workdir.resolve())
    if args.workdir is not None and args.workdir.exists() and any(args.workdir.iterdir()):
        return f"--workdir {args.workdir} is not empty (add --resume to go on with it)"
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="lakehouse-verify-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    harness = Harness(workdir, settings_of(args))
    harness.prepare()
    return harness


def main(argv: Sequence[str] | None = None) -> int:
    """Run every phase, print the summary line; 0 only if every record landed exactly once."""
    args = parse_args(argv)
    INTERRUPTS.install()
    try:
        harness = start_harness(args)
    except KeyboardInterrupt:
        progress("stopped before the first run")
        return 130
    if isinstance(harness, str):
        print(f"error: {harness}", file=sys.stderr)
        return 2
    settings, workdir = harness.settings, harness.workdir
    points = [str(p) for p in get_args(FaultPoint)]
    cases = fault_cases(points, crash_actions(get_args(FaultAction)), quick=settings["quick"])
    progress(
        f"{settings['records']} records in {len(harness.plan)} files, {len(cases)} fault cases, "
        f"{settings['random_kills']} random kills, in {workdir}"
        + (f" (resumed after {harness.started} runs)" if args.resume else "")
    )
    stopped = False
    try:
        harness.fault_phase(cases)
        harness.random_phase(settings["random_kills"])
        harness.final_phase()
        harness.verify()
    except KeyboardInterrupt:
        stopped = True
    finally:
        INTERRUPTS.ignore()
        harness.stop_running()
    if stopped:
        progress(f"stopped; go on with: python -m crash_matrix --workdir {workdir} --resume")
        return 130
    figures = harness.figures
    figures.seconds = harness.elapsed()
    for problem in figures.errors:
        progress(f"note: {problem}")
    if figures.not_fired:
        progress(f"note: fault rules that never fired: {', '.join(figures.not_fired)}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures.as_json(), indent=2) + "\n", encoding="utf-8")
    print(summary_line(figures), flush=True)
    if figures.ok and args.workdir is None:
        shutil.rmtree(workdir)
    elif not figures.ok:
        progress(f"state and run logs kept in {workdir}")
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
