"""Child processes of the tests: each a new Python driver with its own JVM, as jobs run.

The child gets this environment without the test session's Spark gateway (it must start its own
JVM) and without any fault rule of the parent, plus the one it is given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tables.faults import ENV_VAR


def child_env(fault: str | None = None, *, master: str = "local[2]") -> dict[str, str]:
    """The environment for a child driver: its own JVM, `master`, and only the given fault."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_VAR, "PYSPARK_GATEWAY_PORT")}
    env["LAKEHOUSE_SPARK_MASTER"] = master
    if fault:
        env[ENV_VAR] = fault
    return env


def run_lakehouse(
    cwd: Path, *args: str, fault: str | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `lakehouse ARGS` in `cwd` as a separate process and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=cwd,
        env=child_env(fault),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
