"""Start-up: a new `lakehouse ingest` process to its first committed batch, against a bare session.

Both sides are new processes, started from nothing: a bare Delta-enabled Spark session (Delta's
own pip configuration, one trivial job), and `lakehouse ingest` of one small JSON file into a
new home (config, session, catalog, tables, stream, commit). Each is timed from its launch to its
milestone: the bare session's first job done (the time it prints), and the batch's commit in the
table's log (the commit's own timestamp, read with DESCRIBE HISTORY). Both run on to their end
(the ingest's audit record, the stream's and the session's stop), which the caller's wall time of
each action covers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from workloads import Action

from tables.engine.class_archive import ARCHIVE_ENV

BARE_SESSION = """
import time
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
builder = (
    SparkSession.builder.master("local[2]")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.range(1).collect()
print("ready", time.time(), flush=True)
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


def _run(command: list[str], cwd: Path, switches: Mapping[str, str] | None = None) -> str:
    env = {
        **os.environ,
        ARCHIVE_ENV: "on",
        **(switches or {}),
        "LAKEHOUSE_SPARK_MASTER": "local[2]",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(REPOSITORY),
    }
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stderr[-400:]}")
    return done.stdout


def bare_session(root: Path, reached: list[float]) -> Action:
    """Start a bare Delta-enabled session in a new process, run one job, stop.

    Seconds from the launch to the job's end go to `reached`.
    """

    def start(_: int) -> None:
        launched = time.time()
        printed = _run([sys.executable, "-c", BARE_SESSION], root)
        ready = next(line for line in printed.splitlines() if line.startswith("ready "))
        reached.append(float(ready.split()[1]) - launched)

    return start


def first_batch(
    root: Path,
    spark: SparkSession,
    reached: list[float],
    switches: Mapping[str, str] | None = None,
) -> Action:
    """Run `lakehouse ingest` in a new process on a new home holding one 100-row JSON file.

    Seconds from the launch to the batch's commit (its timestamp in the table's log, read by
    `spark`) go to `reached`. `switches` are environment variables that turn a speed device off.
    """
    lakehouse = [sys.executable, "-c", "from ingest.cli.commands import main; main()"]

    def ingest(i: int) -> None:
        project = Path(tempfile.mkdtemp(prefix=f"start-{i}-", dir=root))
        (project / "lakehouse.toml").write_text(CONFIG)
        landing = project / "landing" / "events"
        landing.mkdir(parents=True)
        rows = (json.dumps({"event_id": f"e{n}", "user_id": "u", "amount": n}) for n in range(100))
        (landing / "part-0.json").write_text("\n".join(rows) + "\n")
        launched = time.time()
        _run([*lakehouse, "ingest", "events"], project, switches)
        reached.append(
            _batch_committed_at(spark, project / ".lakehouse/warehouse/events") - launched
        )

    return ingest


def _batch_committed_at(spark: SparkSession, table: Path) -> float:
    """The epoch seconds of the table's first batch commit, as its log records them."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").select(
        F.unix_millis("timestamp").alias("at"), "userMetadata"
    )
    for row in history.orderBy("at").collect():
        if row["userMetadata"] and json.loads(row["userMetadata"]).get("kind") == "batch":
            return float(row["at"]) / 1000
    raise RuntimeError(f"no batch commit in {table}'s log")
