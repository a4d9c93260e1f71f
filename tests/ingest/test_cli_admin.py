"""Operator commands through the CLI, and hostile names that must never reach SQL."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app

runner = CliRunner()

CONFIG = """
[lakehouse]
home = "state"
replay_window = "1 hours"

[tables.admin_events]
schema = "event_id STRING NOT NULL, amount DOUBLE"
keys = ["event_id"]

[pipelines.admin_landing]
table = "admin_events"
[pipelines.admin_landing.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""

HOSTILE = [
    "x`; DROP TABLE canary --",
    "canary; DROP TABLE canary",
    "canary--",
    "canary /* x */",
    "canary' OR '1'='1",
    'canary" OR "1"="1',
    "canary`",
    "`canary`",
    "canary)",
    "(canary",
    "canary;",
    "; DROP TABLE canary",
    "canary\nDROP TABLE canary",
    "canary\tx",
    "canary x",
    "canary,canary",
    "canary.*",
    "*",
    "canary.x.y.z",
    ".canary",
    "canary.",
    "1canary",
    "canary\\",
    "canary%",
    "canary$",
    "canary@x",
    "canary#",
    "canary!",
    "canary&&x",
    "canary|x",
    "canary>x",
    "canary<x",
    "canary=1",
    "canary+1",
    "canary?",
    "canary[0]",
    "canary{}",
    "delta.`/tmp/x`",
    "parquet.`/etc`",
    "/etc/passwd",
    "../canary",
    "~canary",
    "canary~",
    "$(rm -rf /)",
    "`rm -rf /`",
    "canary\x00",
    "canäry",
    "表",
    "a" * 200,
    "",
    " ",
    "canary ",
    "IDENTIFIER('canary')",
    "canary UNION SELECT 1",
]


@pytest.fixture(scope="module")
def project(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("admin")
    (root / "lakehouse.toml").write_text(CONFIG)
    landing = root / "landing"
    landing.mkdir()
    for n in range(3):
        rows = [json.dumps({"event_id": f"e{n}-{i}", "amount": 1.0}) for i in range(4)]
        (landing / f"{n}.json").write_text("\n".join(rows) + "\n")
        os.utime(landing / f"{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    result = runner.invoke(app, ["ingest", "-c", str(root / "lakehouse.toml")])
    assert result.exit_code == 0, result.output
    spark.sql("CREATE TABLE IF NOT EXISTS canary (id INT) USING delta")
    spark.sql("INSERT INTO canary VALUES (1)")
    return root


def replay(project: Path, *args: str) -> list[str]:
    """`lakehouse replay admin_events` arguments for the app of the test project."""
    config = str(project / "lakehouse.toml")
    return ["replay", "admin_events", "--app-id", "admin_landing", *args, "-c", config]


def test_replay_through_the_cli(spark: SparkSession, project: Path) -> None:
    spark.sql("DELETE FROM admin_events WHERE event_id = 'e1-2'")

    dry = runner.invoke(app, replay(project, "--from-batch", "0", "--dry-run", "-f", "json"))
    done = runner.invoke(app, replay(project, "--from-batch", "1", "--to-batch", "1", "-f", "json"))

    assert dry.exit_code == 0, dry.output
    assert [r["rows_restored"] for r in json.loads(dry.stdout)] == [0, 1, 0]
    assert done.exit_code == 0, done.output
    [row] = json.loads(done.stdout)
    assert (row["batch_id"], row["rows_restored"], row["rows_already_present"]) == (1, 1, 3)
    assert spark.table("admin_events").count() == 12


def test_replace_asks_first(project: Path) -> None:
    refused = runner.invoke(app, replay(project, "--from-batch", "0", "--replace"), input="n\n")
    assert refused.exit_code == 1
    assert "Aborted" in refused.output


def test_replay_with_missing_files_names_them(project: Path, tmp_path: Path) -> None:
    moved = tmp_path / "2.json"
    (project / "landing" / "2.json").rename(moved)
    try:
        result = runner.invoke(app, replay(project, "--from-batch", "0"))
    finally:
        moved.rename(project / "landing" / "2.json")
    assert result.exit_code == 1
    assert "nothing was replayed: batch 2:" in result.stderr
    assert "2.json" in result.stderr


def test_vacuum_optimize_apps_and_reset(spark: SparkSession, project: Path) -> None:
    config = str(project / "lakehouse.toml")
    refused = runner.invoke(app, ["vacuum", "admin_events", "--retain-hours", "2", "-c", config])
    dry = runner.invoke(app, ["vacuum", "admin_events", "--dry-run", "-c", config])
    optimized = runner.invoke(app, ["optimize", "admin_events", "--zorder-by", "amount"])
    apps = runner.invoke(app, ["apps", "admin_events", "-f", "json"])
    forward = runner.invoke(
        app, ["reset-app", "admin_events", "--app-id", "admin_landing", "--to-batch", "9", "--yes"]
    )
    back = runner.invoke(
        app, ["reset-app", "admin_events", "--app-id", "admin_landing", "--to-batch", "1", "--yes"]
    )

    assert refused.exit_code == 1
    assert "pass --force" in refused.stderr
    assert dry.exit_code == 0, dry.output
    assert "admin_events: would remove" in dry.stdout
    assert ".parquet" not in dry.stdout
    assert optimized.exit_code == 0, optimized.output
    assert "files before, 1 after" in optimized.stdout
    assert apps.exit_code == 0
    assert json.loads(apps.stdout)[0]["last_batch"] == 2
    assert forward.exit_code == 1
    assert "pass --force" in forward.stderr
    assert back.exit_code == 0, back.output
    assert "moved from 2 to 1" in back.stdout


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_rejected_and_execute_nothing(
    spark: SparkSession, project: Path, name: str
) -> None:
    command = [
        ["status", name],
        ["history", name],
        ["apps", name],
        ["optimize", name],
        ["vacuum", name, "--dry-run"],
        ["optimize", "admin_events", "--zorder-by", name],
        ["history", "admin_events", "--app-id", name],
        ["reset-app", "admin_events", "--app-id", name, "--to-batch", "0", "--yes"],
        [
            "replay",
            name,
            "--app-id",
            "a",
            "--from-batch",
            "0",
            "-c",
            str(project / "lakehouse.toml"),
        ],
    ][HOSTILE.index(name) % 9]

    result = runner.invoke(app, command)

    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: invalid ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert spark.table("canary").count() == 1
    assert spark.catalog.tableExists("admin_events")


def test_there_are_at_least_fifty_hostile_names() -> None:
    assert len(set(HOSTILE)) >= 50
