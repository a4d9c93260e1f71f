"""A record that kills the driver JVM stops no pipeline: each restart narrows, the last commits.

`lakehouse ingest` runs as its own process with `LAKEHOUSE_FAULT_RECORD=jvm`: the JVM that reads
a marked record halts, as a stack overflow in a task ends it. The first run reports the lost JVM
in one line (exit 75, retry); each later run narrows the batch a step (every trial that halts the
JVM ends that run), until the record is quarantined and the rest of the batch commits once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.faults import CRASH_MARKER, RECORD_CRASH_ENV
from tests.support.processes import child_env
from tests.support.projects import (
    Pipeline,
    copies_on_disk,
    events,
    land,
    table_location,
    write_project,
)

pytestmark = pytest.mark.slow
EXIT_TRANSIENT = 75


def ingest(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**child_env(), RECORD_CRASH_ENV: "jvm"}
    return subprocess.run(
        [sys.executable, "-m", "ingest.cli", "ingest", "landing"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_record_that_kills_the_jvm_is_narrowed_over_restarts_and_quarantined(
    spark: SparkSession, tmp_path: Path
) -> None:
    landings = write_project(tmp_path, [Pipeline("landing", "app", max_files_per_trigger=None)])
    land(landings["landing"], "a.json", events(["a1", "a2", "a3"]))
    land(landings["landing"], "b.json", [*events(["b1"]), {"event_id": CRASH_MARKER}])

    first = ingest(tmp_path)
    runs = [first]
    while runs[-1].returncode != 0 and len(runs) < 10:
        runs.append(ingest(tmp_path))

    assert first.returncode == EXIT_TRANSIENT, first.stderr
    (line,) = first.stderr.strip().splitlines()
    assert line.startswith("error: pipeline landing, batch 0: the Spark driver JVM was lost")
    assert "Traceback" not in first.stderr
    assert runs[-1].returncode == 0, runs[-1].stderr
    assert all(r.returncode == EXIT_TRANSIENT for r in runs[:-1]), [r.stderr for r in runs]
    assert copies_on_disk(spark, tmp_path) == {"a1": 1, "a2": 1, "a3": 1, "b1": 1}
    quarantine = spark.read.format("delta").load(table_location(tmp_path, "events_quarantine"))
    (row,) = quarantine.select("_lh_reason", "_lh_raw").collect()
    assert row["_lh_reason"].startswith("crashed the reader: the Spark driver JVM was lost")
    assert CRASH_MARKER in row["_lh_raw"]
    again = ingest(tmp_path)
    assert again.returncode == 0, again.stderr
    assert copies_on_disk(spark, tmp_path) == {"a1": 1, "a2": 1, "a3": 1, "b1": 1}
