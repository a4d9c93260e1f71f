"""Child processes of the tests: each a new Python driver with its own JVM, as jobs run.

The child gets this environment without the test session's Spark gateway (it must start its own
JVM) and without any fault rule of the parent, plus the one it is given.

A child JVM starts as a short-lived command's should: C1 only (`-XX:TieredStopAtLevel=1`; the
optimizing compiler's threads cost a test's few seconds of work more than they save) and mapping
the class archive that `tests/conftest.py` writes once per pytest run (`use`: a child never
writes one, which would add a line to its output and 20 s to its exit). Together they take a
child's start from about 18 s to 10 s here. Like the test session, a child evaluates its plans
interpreted (Spark reads `-Dspark.*` system properties as settings): a child's few batches of a
few rows pay for generating and compiling their code more than they gain from it. None of these
changes what the JVM computes; the product, `make bench` and `make soak` keep the defaults.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

from tables.engine.class_archive import ARCHIVE_ENV
from tables.engine.session import CONNECT_MODE_VARIABLES
from tables.faults import ENV_VAR

#: How every Spark session of the tests evaluates its plans: interpreted, without generated code
#: (CONTRIBUTING.md#test-tiers); `GENERATED` is Spark's default, for a test of generated code.
INTERPRETED = MappingProxyType(
    {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
)
GENERATED = MappingProxyType(
    {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
)
#: The test session's driver JVM options: the parallel collector, whose pauses stop the world
#: but which spends less CPU than G1 (the JVM's default here), and two busy cores are what the
#: tiers wait on. Four large fast modules (history, commit, audit, replay: 53 tests) in two
#: workers, taking turns on 2026-12-03: 483 and 500 s with G1, 434 and 446 s with it (10 % less).
SESSION_JVM_OPTIONS = "-XX:+UseParallelGC"
#: The child JVMs' options (Spark's launcher passes `SPARK_SUBMIT_OPTS` to the driver JVM);
#: `LAKEHOUSE_TEST_CHILD_JVM_OPTIONS` replaces them (empty: the JVM's and Spark's defaults), to
#: compare. C1 alone reserves a 48 MB code cache (240 MB with both compilers): the session kept
#: 2,000 compiled plan classes then (200 now), and a child that filled it died ("Out of space
#: in CodeCache for adapters", a VirtualMachineError that ends the driver).
CHILD_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
CHILD_JVM_OPTIONS_ENV = "LAKEHOUSE_TEST_CHILD_JVM_OPTIONS"
#: A child driver's settings as system properties: the test session's. Drivers only: Spark
#: refuses `-Dspark.*` in an executor's Java options (INVALID_EXECUTOR_SPARK_OPTIONS).
CHILD_DRIVER_PROPERTIES = " ".join(f"-D{key}={value}" for key, value in INTERPRETED.items())


def child_jvm_options() -> str:
    """The options of every JVM the tests start for Spark: drivers, executors, cluster daemons.

    A standalone cluster's executors run the same few seconds of work a child driver does: with
    both compilers they took 228 CPU-s of tests/ingest/test_cluster.py (two jobs of 25 rows),
    C1 alone 124, and the test 145 s instead of 201 (2026-12-02).
    """
    return os.environ.get(CHILD_JVM_OPTIONS_ENV, CHILD_JVM_OPTIONS)


def child_driver_options() -> str:
    """A child driver's JVM options: `child_jvm_options`, and its plans interpreted as the test
    session's are (replaced too when `LAKEHOUSE_TEST_CHILD_JVM_OPTIONS` is set)."""
    if CHILD_JVM_OPTIONS_ENV in os.environ:
        return os.environ[CHILD_JVM_OPTIONS_ENV]
    return f"{CHILD_JVM_OPTIONS} {CHILD_DRIVER_PROPERTIES}"


def child_env(fault: str | None = None, *, master: str = "local[2]") -> dict[str, str]:
    """The environment for a child driver: its own JVM, `master`, and only the given fault.

    Without this process's ties to its own Spark: its py4j gateway, and the Spark Connect mode a
    Connect session leaves in the environment (a `--remote` child sets its own).
    """
    inherited = (ENV_VAR, "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", *CONNECT_MODE_VARIABLES)
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    env["LAKEHOUSE_SPARK_MASTER"] = master
    env[ARCHIVE_ENV] = "use"
    env["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, [env.get("SPARK_SUBMIT_OPTS"), child_driver_options()])
    )
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


def command_lines() -> list[str]:
    """Every process's command line, as `ps` shows it to any local user."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                raw = (entry / "cmdline").read_bytes()
                lines.append(raw.replace(b"\0", b" ").decode(errors="replace"))
    return lines
