"""Separate `lakehouse` processes: a crash after the Delta commit, a restart, a query by name.

Each step is a new Python and JVM process sharing only the lakehouse home on disk, as scheduled
jobs and operators do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import run_lakehouse
from tests.support.projects import Pipeline, copies, events, land, write_project

pytestmark = pytest.mark.slow


def test_crash_after_commit_then_restart_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    landing = write_project(tmp_path, [Pipeline("events", "events-landing")])["events"]
    expected = set()
    for n in range(3):
        ids = [f"e{n}-{i}" for i in range(20)]
        expected.update(ids)
        land(landing, f"{n}.json", events(ids + ids[:3]), mtime=1_700_000_000 + n)

    crashed = run_lakehouse(tmp_path, "ingest", fault="after_commit:kill@1")
    assert crashed.returncode in (137, -9), crashed.stderr
    assert "batch 0: committed" in crashed.stderr

    restarted = run_lakehouse(tmp_path, "ingest")
    assert restarted.returncode == 0, restarted.stderr
    assert "batch 1: skipped" in restarted.stderr
    assert "2 batches (1 committed, 1 skipped, 0 empty)" in restarted.stdout

    landed = copies(tmp_path)
    assert set(landed) == expected
    assert set(landed.values()) == {1}


def sql_in(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`lakehouse sql "SELECT 1"` in `tmp_path` with exactly `env`."""
    return subprocess.run(
        [sys.executable, "-m", "ingest.cli", "sql", "SELECT 1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_missing_java_is_one_clear_line(tmp_path: Path) -> None:
    result = sql_in(tmp_path, {"PATH": str(tmp_path), "HOME": os.environ.get("HOME", "/root")})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: Java not found: install a JDK 17 and put `java` on PATH or set JAVA_HOME"
    )


@pytest.mark.parametrize("variable", ["SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"])
def test_an_environment_in_spark_connect_mode_is_one_clear_line(
    tmp_path: Path, variable: str
) -> None:
    """A shell's Spark Connect setup, or a parent that opened a Connect session, left a variable
    that makes PySpark build Connect sessions only: said as such, not as a JVM that failed."""
    env = {**os.environ, variable: "sc://127.0.0.1:1" if variable == "SPARK_REMOTE" else "1"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    result = sql_in(tmp_path, env)
    assert result.returncode == 1
    assert result.stderr.strip().startswith(f"error: the environment sets {variable}, which "), (
        result.stderr[-2000:]
    )
    assert "Traceback" not in result.stderr


def test_unreachable_jar_repository_is_one_clear_line(tmp_path: Path) -> None:
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(
        '<ivysettings><settings defaultResolver="none"/><resolvers>'
        f'<filesystem name="none"><artifact pattern="{tmp_path}/no-repo/[artifact].[ext]"/>'
        "</filesystem></resolvers></ivysettings>"
    )
    conf = {"spark.jars.ivySettings": str(settings), "spark.jars.ivy": str(tmp_path / "ivy")}
    script = (
        "from tables.engine.session import get_spark\n"
        "from tables.errors import SessionError\n"
        "try:\n"
        f"    get_spark({str(tmp_path / 'home')!r}, extra_conf={conf!r})\n"
        "except SessionError as exc:\n"
        "    print(exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    # An empty JAR cache: a remembered Delta class path would spare the resolution altogether.
    env["LAKEHOUSE_JAR_CACHE"] = str(tmp_path / "jar-cache")
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.stdout.startswith(
        "could not start Spark with Delta: the Delta JARs could not be resolved"
    )
    assert len(result.stdout.strip().splitlines()) == 1
