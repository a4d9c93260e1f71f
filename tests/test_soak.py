"""A stream that runs on stays as small as it was: 300 batches of one `lakehouse ingest` process.

`bench/soak.py --batches 300` (the full proof, 3,000 batches, is `make soak`): one continuous
ingest with maintenance every 100 batches, a file landing as each batch settles. Between batch
100 and batch 300 the driver JVM's live heap (after a full GC), the Python driver's RSS, the open
descriptors and the threads of both must each stay within 1.2x: nothing grows without bound.
Latency and the commands' seconds are `make soak`'s figures (they need a quiet machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.soak]

SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"
BOUNDED = ("heap_late_vs_early", "rss_late_vs_early", "fds_late_vs_early", "threads_late_vs_early")


def test_three_hundred_batches_leave_heap_rss_descriptors_and_threads_within_bounds(
    tmp_path: Path,
) -> None:
    out = tmp_path / "soak.json"
    run = subprocess.run(
        [
            sys.executable,
            str(SOAK),
            "--batches",
            "300",
            "--early-at",
            "100",
            "--heap-every",
            "100",
            "--optimize-every",
            "100",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    # Exit 1: a goal missed; the latency and status goals are not this test's (see above).
    assert run.returncode in (0, 1), run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["batches"] == 300
    ratios = {r["name"]: r for r in report["ratios"]}
    figures = {name: ratios[name]["value"] for name in BOUNDED}
    print(f"soak of 300 batches, batch 300 against batch 100: {figures}")
    assert all(ratios[name]["met"] for name in BOUNDED), figures
