"""Start-up: a new `lakehouse ingest` process to its first committed batch, against a bare session.

Both sides are whole processes, started from nothing and run to their end: a bare Delta-enabled
Spark session (Delta's own pip configuration, one trivial job), and `lakehouse ingest` of one
small JSON file into a new home (config, session, catalog, table, stream, commit, audit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from workloads import Action

from tables.class_archive import ARCHIVE_ENV

BARE_SESSION = """
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
builder = (
    SparkSession.builder.master("local[2]")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.range(1).collect()
spark.stop()
"""

CONFIG = """
[lakehouse]
home = ".lakehouse"

[tables.events]
schema = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"
keys = ["event_id"]

[pipelines.events]
table = "events"
app_id = "events-landing"
trigger = "available-now"

[pipelines.events.source]
kind = "files"
format = "json"
path = "landing/events"
"""


REPOSITORY = Path(__file__).resolve().parents[1]


def _run(command: list[str], cwd: Path) -> None:
    env = {
        **os.environ,
        ARCHIVE_ENV: "on",
        "LAKEHOUSE_SPARK_MASTER": "local[2]",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(REPOSITORY),
    }
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stderr[-400:]}")


def bare_session(root: Path) -> Action:
    """Start a bare Delta-enabled session in a new process, run one job, stop."""

    def start(_: int) -> None:
        _run([sys.executable, "-c", BARE_SESSION], root)

    return start


def first_batch(root: Path) -> Action:
    """Run `lakehouse ingest` in a new process on a new home holding one 100-row JSON file."""
    lakehouse = [sys.executable, "-c", "from ingest.cli import main; main()"]

    def ingest(i: int) -> None:
        project = Path(tempfile.mkdtemp(prefix=f"start-{i}-", dir=root))
        (project / "lakehouse.toml").write_text(CONFIG)
        landing = project / "landing" / "events"
        landing.mkdir(parents=True)
        rows = (json.dumps({"event_id": f"e{n}", "user_id": "u", "amount": n}) for n in range(100))
        (landing / "part-0.json").write_text("\n".join(rows) + "\n")
        _run([*lakehouse, "ingest", "events"], project)

    return ingest
