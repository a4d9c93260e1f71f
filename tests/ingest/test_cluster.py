"""Scheduled spark-submit jobs on a standalone cluster, run after run, beside an analyst.

A master and two one-core workers on 127.0.0.1, started from the pyspark package. The job is the
shipped job script (`lakehouse job-script` prints its command line) running `ingest`; three runs
in a row with new files landing between them. The runs must find the tables of the runs before
(the warehouse catalog), land every row once, and `lakehouse sql` from another process must
answer while the third run is going.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.job import submit_command
from tests.support.processes import child_env, run_lakehouse
from tests.support.projects import Pipeline, events, land, write_project
from tests.support.servers import LOOPBACK, SPARK_HOME, SparkStandalone

pytestmark = pytest.mark.slow


def submit(cwd: Path, master: str) -> subprocess.Popen[str]:
    command = submit_command(master, ["ingest", "-c", "lakehouse.toml"])
    command[0] = str(SPARK_HOME / "bin" / "spark-submit")
    settings = {
        "spark.driver.host": LOOPBACK,
        "spark.cores.max": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "1g",
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
    return subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_three_submitted_runs_in_a_row_land_every_row_once(tmp_path: Path) -> None:
    pipeline = Pipeline("events", "events-job", max_files_per_trigger=None)
    landing = write_project(tmp_path, [pipeline])["events"]
    expected: set[str] = set()
    with SparkStandalone(tmp_path / "cluster", workers=2) as cluster:
        for run in range(3):
            ids = [f"r{run}-{i}" for i in range(25)]
            land(landing, f"{run}.json", events(ids))
            expected.update(ids)
            job = submit(tmp_path, cluster.master)
            if run == 2:
                answer = run_lakehouse(tmp_path, "sql", "SELECT count(*) AS n FROM events")
                assert answer.returncode == 0, answer.stderr
                assert job.poll() is None, "the third run ended before the query: lengthen it"
            out, err = job.communicate(timeout=900)
            assert job.returncode == 0, err[-3000:]
            # spark-submit merges the Python driver's stderr into its own stdout.
            assert f"batch {run}: committed" in out, out[-3000:]
    rows = run_lakehouse(
        tmp_path, "sql", "--format", "json", "--limit", "1000", "SELECT event_id FROM events"
    )
    assert rows.returncode == 0, rows.stderr
    landed = [row["event_id"] for row in json.loads(rows.stdout)]
    assert sorted(landed) == sorted(expected)
    history = run_lakehouse(tmp_path, "history", "events", "--format", "json")
    assert history.returncode == 0, history.stderr
    assert sorted(e["batch_id"] for e in json.loads(history.stdout)) == [0, 1, 2]
