"""Scheduled spark-submit jobs on a standalone cluster, run after run, beside an analyst.

A master and two one-core workers on 127.0.0.1, started from the pyspark package. The job is the
shipped job script (`lakehouse job-script` prints its command line) running `ingest`; two runs
in a row with new files landing between them. The second run must find the tables of the first
(the warehouse catalog) and each must land every row once: the table holds exactly the rows
landed so far after each run. `lakehouse sql` from another process must answer while the second
run is going, with whole runs only (each run is one batch).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.submit import submit_command
from tests.support.processes import child_env, child_jvm_options, run_lakehouse
from tests.support.projects import Pipeline, events, land, write_project
from tests.support.servers import LOOPBACK, SPARK_HOME, SparkStandalone

pytestmark = pytest.mark.slow

ROWS_PER_RUN = 25
RUNS = 2


def submit(cwd: Path, master: str) -> subprocess.Popen[str]:
    command = submit_command(master, ["ingest", "-c", "lakehouse.toml"])
    command[0] = str(SPARK_HOME / "bin" / "spark-submit")
    settings = {
        "spark.driver.host": LOOPBACK,
        "spark.cores.max": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "1g",
        "spark.executor.extraJavaOptions": child_jvm_options(),
    }
    for key, value in settings.items():
        command[1:1] = ["--conf", f"{key}={value}"]
    env = {
        **child_env(),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": LOOPBACK,
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    }
    # A session of its own: the Python driver spark-submit starts is killed with it.
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def landed_ids(cwd: Path) -> list[str]:
    """Every event_id in the table, one per row, asked with `lakehouse sql` from a shell."""
    rows = run_lakehouse(
        cwd, "sql", "--format", "json", "--limit", "1000", "SELECT event_id FROM events"
    )
    assert rows.returncode == 0, rows.stderr
    return sorted(row["event_id"] for row in json.loads(rows.stdout))


def test_submitted_runs_in_a_row_land_every_row_once(tmp_path: Path) -> None:
    pipeline = Pipeline("events", "events-job", max_files_per_trigger=None)
    landing = write_project(tmp_path, [pipeline])["events"]
    expected: set[str] = set()
    with SparkStandalone(tmp_path / "cluster", workers=2) as cluster:
        for run in range(RUNS):
            ids = [f"r{run}-{i}" for i in range(ROWS_PER_RUN)]
            land(landing, f"{run}.json", events(ids))
            job = submit(tmp_path, cluster.master)
            try:
                if run == RUNS - 1:
                    answer = run_lakehouse(
                        tmp_path, "sql", "--format", "json", "SELECT count(*) AS n FROM events"
                    )
                    assert answer.returncode == 0, answer.stderr
                    assert job.poll() is None, "the last run ended before the query: lengthen it"
                    # The runs before have committed; this run's one batch has or has not.
                    [row] = json.loads(answer.stdout)
                    assert row["n"] in (len(expected), len(expected) + ROWS_PER_RUN), row
                out, err = job.communicate(timeout=900)
            finally:
                if job.poll() is None:
                    os.killpg(job.pid, signal.SIGKILL)
                    job.wait()
            assert job.returncode == 0, err[-3000:]
            # spark-submit merges the Python driver's stderr into its own stdout.
            assert f"batch {run}: committed" in out, out[-3000:]
            expected.update(ids)
            assert landed_ids(tmp_path) == sorted(expected), f"after run {run + 1}"
    history = run_lakehouse(tmp_path, "history", "events", "--format", "json")
    assert history.returncode == 0, history.stderr
    assert sorted(e["batch_id"] for e in json.loads(history.stdout)) == list(range(RUNS))
