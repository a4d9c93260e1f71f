"""A routed pipeline as an operator meets it: `lakehouse.toml` refusals in one line, then
`ingest`, `status`, `verify` and `replay --dry-run` through the CLI (the routing itself:
tests/ingest/test_routing.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.config import load_config
from tables.errors import ConfigFileError

pytestmark = [pytest.mark.downstream, pytest.mark.evolution]

runner = CliRunner()

ROUTED = """
[lakehouse]
home = "state"

[tables.r_clicks]
schema = "event_id STRING NOT NULL, kind STRING, page STRING"
keys = ["event_id"]

[tables.r_orders]
schema = "event_id STRING NOT NULL, kind STRING, amount DOUBLE"
keys = ["event_id"]

[pipelines.router]
route_by = "kind"
#PIPELINE
[pipelines.router.routes]
r_clicks = ["click", "view"]
r_orders = "order"
#ROUTES
[pipelines.router.source]
format = "json"
path = "landing"
"""


def test_a_routed_config_loads_with_its_targets_in_order(tmp_path: Path) -> None:
    config = tmp_path / "lakehouse.toml"
    config.write_text(ROUTED)
    pipeline = load_config(config).pipeline("router")
    assert pipeline.targets == ("r_clicks", "r_orders")
    assert pipeline.routing is not None
    assert pipeline.routing.dead_letter == "router_unrouted"
    assert [route.values for route in pipeline.routing.routes] == [("click", "view"), ("order",)]
    assert pipeline.writes("R_ORDERS")


@pytest.mark.parametrize(
    ("replace", "key", "message"),
    [
        (("#PIPELINE", 'table = "r_clicks"'), "pipelines.router.route_by", "not both"),
        (("#ROUTES", 'nope = "x"'), "pipelines.router.routes.nope", "'nope' is not declared"),
        (
            ('r_orders = "order"', 'r_orders = "view"'),
            "pipelines.router.routes.r_orders",
            "route value 'view' also sends records to table r_clicks",
        ),
        (
            ('r_orders = "order"', "r_orders = 5"),
            "pipelines.router.routes.r_orders",
            "expected an array of strings, got integer",
        ),
        (
            ('r_orders = "order"', "r_orders = []"),
            "pipelines.router.routes.r_orders",
            "names no route value",
        ),
        (('route_by = "kind"', 'route_by = " "'), "pipelines.router.route_by", "non-empty"),
        (('route_by = "kind"', ""), "pipelines.router", "route_by"),
        (
            ("#PIPELINE", 'dead_letter = "r_orders"'),
            "pipelines.router.dead_letter",
            "r_orders is a declared table",
        ),
        (
            ("#PIPELINE", 'dead_letter = "r_orders_quarantine"'),
            "pipelines.router.dead_letter",
            "quarantine table",
        ),
        (("#PIPELINE", 'dead_letter = "a b"'), "pipelines.router.dead_letter", ""),
        (('format = "json"', 'format = "parquet"'), "pipelines.router.route_by", "Parquet"),
    ],
)
def test_a_broken_routed_config_is_refused_naming_the_file_and_key(
    tmp_path: Path, replace: tuple[str, str], key: str, message: str
) -> None:
    config = tmp_path / "lakehouse.toml"
    config.write_text(ROUTED.replace(*replace))
    with pytest.raises(ConfigFileError) as info:
        load_config(config)
    text = str(info.value)
    assert text.startswith(f"{config}: {key}"), text
    assert message in text
    assert "\n" not in text


def test_a_routed_pipeline_through_the_cli_ingest_status_verify_and_replay(
    spark: SparkSession, tmp_path: Path
) -> None:
    """As an operator meets it: one run into two tables and the dead-letter table, each
    target's `status` naming the pipeline, `verify` passing on each, `replay --dry-run`
    finding every record of its own route present."""
    config = tmp_path / "lakehouse.toml"
    config.write_text(ROUTED)
    (tmp_path / "landing").mkdir()
    lines = [
        {"event_id": "c1", "kind": "click", "page": "/"},
        {"event_id": "o1", "kind": "order", "amount": 2.0},
        {"event_id": "o2", "kind": "order", "amount": 3.0},
        {"event_id": "x1", "kind": "ping"},
    ]
    (tmp_path / "landing" / "a.json").write_text("\n".join(map(json.dumps, lines)) + "\n")

    ingested = runner.invoke(app, ["ingest", "-c", str(config)])

    assert ingested.exit_code == 0, ingested.output
    assert (
        "router: 1 batches (1 committed, 0 skipped, 0 empty) into 2 tables (r_clicks: 1 "
        "inserted, 0 quarantined; r_orders: 2 inserted, 0 quarantined), 1 not routed into "
        "router_unrouted" in ingested.stdout
    )
    again = runner.invoke(app, ["ingest", "-c", str(config)])
    assert again.exit_code == 0, again.output
    assert (
        "router: 0 batches (0 committed, 0 skipped, 0 empty), 0 not routed into router_unrouted"
        in again.stdout
    )
    assert spark.table("router_unrouted").count() == 1
    for table, rows in (("r_clicks", 1), ("r_orders", 2)):
        status = runner.invoke(app, ["status", table, "-f", "json", "-c", str(config)])
        assert status.exit_code == 0, status.output
        [row] = json.loads(status.stdout)
        assert row["apps"] == {"router": 0}
        assert "router" in row["streams"]
        assert spark.table(table).count() == rows
        verified = runner.invoke(app, ["verify", table, "-c", str(config)])
        assert verified.exit_code == 0, verified.output
    replayed = runner.invoke(
        app,
        [
            "replay",
            "r_orders",
            "--app-id",
            "router",
            "--from-batch",
            "0",
            "--dry-run",
            "-c",
            str(config),
        ],
    )
    assert replayed.exit_code == 0, replayed.output
    assert "2" in replayed.stdout
