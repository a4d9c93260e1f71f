"""Lakehouse projects for the process-level tests: one config builder, landing files, queries.

The tests that run `lakehouse` as separate processes (tests/ingest/test_process.py, test_stop.py,
test_cluster.py, test_many_processes.py) each write a project directory: a lakehouse.toml with
its home inside the project, JSON landing directories, files dropped into them, and a count of
each key's copies: through `lakehouse sql` where the query by name is what a test shows, else
read by path in the test's own session (no JVM start).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from tables.engine.class_archive import ARCHIVE_ENV
from tests.support.processes import child_env, run_lakehouse


@dataclass(frozen=True)
class Table:
    """A declared table: its schema and its one key column."""

    name: str
    schema: str
    key: str


@dataclass(frozen=True)
class Pipeline:
    """A JSON landing directory (`path`, relative to the project) into a table under an app id."""

    name: str
    app_id: str
    table: str = "events"
    path: str = "landing"
    max_files_per_trigger: int | None = 1


EVENTS = Table("events", "event_id STRING NOT NULL, amount DOUBLE", "event_id")


def lakehouse_toml(pipelines: Sequence[Pipeline], tables: Sequence[Table] = (EVENTS,)) -> str:
    """The lakehouse.toml of a project whose home is `.lakehouse` inside it."""
    lines = ["[lakehouse]", 'home = ".lakehouse"', ""]
    for table in tables:
        lines += [f"[tables.{table.name}]", f'schema = "{table.schema}"']
        lines += [f'keys = ["{table.key}"]', ""]
    for pipeline in pipelines:
        lines += [f"[pipelines.{pipeline.name}]", f'table = "{pipeline.table}"']
        lines += [f'app_id = "{pipeline.app_id}"', f"[pipelines.{pipeline.name}.source]"]
        lines += ['format = "json"', f'path = "{pipeline.path}"']
        if pipeline.max_files_per_trigger is not None:
            lines.append(f"max_files_per_trigger = {pipeline.max_files_per_trigger}")
        lines.append("")
    return "\n".join(lines)


def write_project(
    root: Path, pipelines: Sequence[Pipeline], tables: Sequence[Table] = (EVENTS,)
) -> dict[str, Path]:
    """Write the config and create each pipeline's landing directory; name -> directory."""
    (root / "lakehouse.toml").write_text(lakehouse_toml(pipelines, tables))
    landings = {pipeline.name: root / pipeline.path for pipeline in pipelines}
    for directory in landings.values():
        directory.mkdir(parents=True)
    return landings


def events(ids: Iterable[str]) -> list[dict[str, Any]]:
    """Rows of the `events` table for `ids`."""
    return [{"event_id": i, "amount": 1.0} for i in ids]


def land(
    directory: Path, name: str, rows: Iterable[Mapping[str, Any]], *, mtime: int | None = None
) -> None:
    """Drop a JSON-lines file atomically (Spark skips names starting with '.').

    `mtime` sets its modification time, which orders the files of one trigger.
    """
    staging = directory / f".{name}.tmp"
    staging.write_text("".join(json.dumps(row) + "\n" for row in rows))
    staging.rename(directory / name)
    if mtime is not None:
        os.utime(directory / name, (mtime, mtime))


def start_lakehouse(
    cwd: Path,
    *args: str,
    new_session: bool = False,
    log: Path | None = None,
    fault: str | None = None,
) -> subprocess.Popen[str]:
    """Start `lakehouse ARGS` in `cwd` as a separate driver, its output piped.

    With `log`, stdout and stderr go to that file instead, which the test can read while the
    driver runs (a long run's pipe nobody reads would fill up). `fault` sets `LAKEHOUSE_FAULT`.
    """
    if log is not None:
        with open(log, "w") as output:
            return subprocess.Popen(
                [sys.executable, "-m", "ingest.cli", *args],
                cwd=cwd,
                env=child_env(fault),
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=new_session,
            )
    return subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=cwd,
        env=child_env(fault),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def copies(root: Path, table: str = "events", key: str = "event_id") -> dict[str, int]:
    """How many times each key is in the table, asked with `lakehouse sql` in a new process."""
    queried = run_lakehouse(
        root,
        "sql",
        "--format",
        "json",
        "--limit",
        "100000",
        f"SELECT {key} AS k, count(*) AS copies FROM {table} GROUP BY {key}",
    )
    assert queried.returncode == 0, queried.stderr
    return {row["k"]: int(row["copies"]) for row in json.loads(queried.stdout)}


def table_location(root: Path, table: str = "events") -> str:
    """Where a table of a project lives: its directory in the project home's warehouse."""
    return str(root / ".lakehouse" / "warehouse" / table)


def copies_on_disk(
    spark: SparkSession, root: Path, table: str = "events", key: str = "event_id"
) -> dict[str, int]:
    """How many times each key is in a project's table, read by path in the test's own session.

    For a scenario whose subject is the ingest, not the query: `copies` pays a JVM start (a new
    `lakehouse sql` process) for the same answer.
    """
    rows = spark.read.format("delta").load(table_location(root, table)).groupBy(key).count()
    return {row[key]: int(row["count"]) for row in rows.collect()}


#: A project with a Kafka pipeline: its drivers load the Kafka connector, another class path.
KAFKA_PROJECT = """[lakehouse]
home = ".lakehouse"

[tables.events]
schema = "event_id STRING NOT NULL"
keys = ["event_id"]

[pipelines.k]
table = "events"
app_id = "events-k"
[pipelines.k.source]
kind = "kafka"
bootstrap_servers = "127.0.0.1:9"
topic = "t"
"""


def prime_class_archives(root: Path) -> None:
    """Write the child drivers' class archives: one per class path the slow tier's children use.

    A JSON project's ingest covers the classes an ingest loads; a Kafka project's query, the
    connector's class path.
    """
    plain = root / "json"
    plain.mkdir()
    write_project(plain, [Pipeline("a", "events-a")])
    land(plain / "landing", "0001.json", events(["k"]))
    prime_class_archive(plain, "ingest", "a")
    kafka = root / "kafka"
    kafka.mkdir()
    (kafka / "lakehouse.toml").write_text(KAFKA_PROJECT)
    prime_class_archive(kafka, "sql", "SELECT 1")


def prime_class_archive(cwd: Path, *args: str) -> None:
    """Run `lakehouse ARGS` in `cwd` with the class archive `on`: it writes its class path's.

    The children map it (`child_env` sets `use`). When the archive is there already, the
    command maps it and writes nothing.
    """
    primed = subprocess.run(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=cwd,
        env={**child_env(), ARCHIVE_ENV: "on"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert primed.returncode == 0, f"priming a class archive: {primed.stderr[-3000:]}"
