"""An SCD type 2 table as an operator meets it: `lakehouse.toml`, `ingest`, `status`, `vacuum`
and `verify` through the CLI (the history itself: tests/ingest/test_history.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app

pytestmark = [pytest.mark.downstream, pytest.mark.evolution]

runner = CliRunner()


CLI_CONFIG = """
[lakehouse]
home = "state"

[tables.scd_customers]
schema = "id STRING NOT NULL, name STRING, seq BIGINT, op STRING"
keys = ["id"]
merge = "upsert"
sequence_by = "seq"
delete_when = "op = 'd'"
history = "scd2"
except_columns = ["op"]

[pipelines.scd_cdc]
table = "scd_customers"
[pipelines.scd_cdc.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""


def test_an_scd2_table_through_the_cli_ingest_status_vacuum_and_verify(
    spark: SparkSession, tmp_path: Path
) -> None:
    """As an operator meets it: the config read, a run, the table's `history` in `status`, its
    deletes kept by `vacuum`, `verify` passing; a retention on it is one line naming the key."""
    config = tmp_path / "lakehouse.toml"
    config.write_text(CLI_CONFIG)
    (tmp_path / "landing").mkdir()
    files = [
        [("a", 1, "c"), ("b", 3, "u")],
        [("a", 5, "d"), ("late", 2, "u")],
    ]
    for n, part in enumerate(files):
        lines = [json.dumps({"id": "k", "name": m, "seq": q, "op": o}) for m, q, o in part]
        (tmp_path / "landing" / f"{n}.json").write_text("\n".join(lines) + "\n")
    ingested = runner.invoke(app, ["ingest", "-c", str(config)])
    assert ingested.exit_code == 0, ingested.output

    rows = spark.table("scd_customers").orderBy("_lh_valid_from").collect()
    assert [(r["name"], r["_lh_valid_from"], r["_lh_valid_to"]) for r in rows] == [
        ("a", 1, 2),
        ("late", 2, 3),
        ("b", 3, 5),
    ]
    status = runner.invoke(app, ["status", "scd_customers", "-f", "json", "-c", str(config)])
    assert status.exit_code == 0, status.output
    [row] = json.loads(status.stdout)
    assert row["history"] == "scd2"
    assert "tombstone_horizon" not in row
    vacuumed = runner.invoke(app, ["vacuum", "scd_customers", "-c", str(config)])
    assert vacuumed.exit_code == 0, vacuumed.output
    assert spark.table("scd_customers_tombstones").count() == 1
    verified = runner.invoke(app, ["verify", "scd_customers", "-c", str(config)])
    assert verified.exit_code == 0, verified.output
    # rows follow each key's newest version, not a batch: `--replace` has nothing to replace
    replay = ["replay", "scd_customers", "--app-id", "scd_cdc", "--from-batch", "0", "--yes"]
    refused = runner.invoke(app, [*replay, "--replace", "-c", str(config)])
    assert refused.exit_code != 0
    assert "scd_customers is an upsert table" in refused.output
    assert "--replace does not apply" in refused.output
    assert "Traceback" not in refused.output

    config.write_text(
        CLI_CONFIG.replace('history = "scd2"', 'history = "scd2"\ntombstone_retention = "90 days"')
    )
    refused = runner.invoke(app, ["status", "scd_customers", "-c", str(config)])
    assert refused.exit_code != 0
    assert (
        "lakehouse.toml: tables.scd_customers.tombstone_retention: does not apply" in refused.output
    )
    assert "Traceback" not in refused.output
