"""Tombstones with a horizon (`tombstone_retention`): an upsert table forgets an old delete, and
says so when a version at or below the forgotten deletes comes in for a key it lacks."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.admin.verify import verify_table
from ingest.cli.commands import app
from ingest.commit import commit_batch
from ingest.commit.tombstones import HORIZON_PROPERTY, expire_tombstones, horizon
from ingest.config import load_config
from tables.delta.history import find_ledger_entry, read_ledger
from tables.delta.table import table_detail
from tables.delta.writer import TableWriter
from tables.errors import ConfigError
from tables.spec import TableSpec
from tests.ingest.test_upsert import records, table_state, upsert_table

pytestmark = pytest.mark.downstream
MakeTable = Callable[..., TableSpec]
runner = CliRunner()
LATER = datetime.now(UTC) + timedelta(days=400)  # every tombstone recorded today has expired


def test_the_retention_is_an_upsert_tables_and_longer_than_the_replay_window(
    tmp_path: Path,
) -> None:
    base = (
        '[tables.c]\nschema = "id STRING, seq BIGINT, op STRING"\nkeys = ["id"]\n'
        'merge = "upsert"\nsequence_by = "seq"\ndelete_when = "op = \'d\'"\n'
    )
    config = tmp_path / "lakehouse.toml"
    config.write_text(base + 'tombstone_retention = "90 days"\n')
    assert load_config(config).tables["c"].effective_tombstone_retention == timedelta(days=90)
    config.write_text(base)
    assert load_config(config).tables["c"].effective_tombstone_retention == timedelta(days=30)

    config.write_text('[lakehouse]\nreplay_window = "20 days"\n' + base)
    assert load_config(config).tables["c"].effective_tombstone_retention == timedelta(days=40)
    config.write_text(base + 'tombstone_retention = "7 days"\n')
    with pytest.raises(ConfigError, match=r"7 days is not longer than the replay window \(7 days"):
        load_config(config)
    insert = '[tables.e]\nschema = "id STRING"\nkeys = ["id"]\ntombstone_retention = "60 days"\n'
    config.write_text(insert)
    with pytest.raises(ConfigError, match="tombstone_retention: applies to merge = 'upsert' only"):
        load_config(config)


def test_an_expired_delete_is_forgotten_and_a_key_it_hid_coming_back_is_counted(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = upsert_table(make_table)
    writer = TableWriter(spark, spec, "cdc")
    commit_batch(writer, 0, records(spark, [("k", "a", 1, "c"), ("j", "b", 2, "c")]))
    commit_batch(writer, 1, records(spark, [("k", "a", 5, "d"), ("j", "b", 6, "u")]))
    assert table_state(spark, spec.name) == {"j": ("b", 6, "u")}

    dry = expire_tombstones(writer, 1, LATER, dry_run=True)
    assert (dry.expired, dry.horizon) == (1, "5")
    assert spark.table(spec.tombstones_name).count() == 1  # a dry run deletes nothing
    expiry = expire_tombstones(writer, 1, LATER)
    assert (expiry.expired, expiry.horizon) == (1, "5")
    assert "1 tombstone(s) recorded before" in expiry.describe()
    assert spark.table(spec.tombstones_name).count() == 0
    assert horizon(spark, spec) == "5"
    assert table_detail(spark, spec.tombstones_name).properties[HORIZON_PROPERTY] == "5"
    operations = {e.meta.source.get("operation") for e in read_ledger(spark, spec.tombstones_name)}
    assert {"tombstones_horizon", "tombstones_expire"} <= operations
    assert expire_tombstones(writer, 1, LATER).expired == 0  # nothing left to expire

    # k at 3 comes back (nothing remembers its delete at 5): it lands and is counted. j at 4 is
    # older than the table's j and changes nothing; m at 9 is above the horizon.
    commit_batch(
        writer, 2, records(spark, [("k", "late", 3, "u"), ("j", "x", 4, "u"), ("m", "n", 9, "c")])
    )
    entry = find_ledger_entry(spark, spec.name, "cdc", 2)
    assert entry is not None
    assert entry.rows_after_horizon == 1
    assert entry.as_row()["rows_after_horizon"] == 1
    assert table_state(spark, spec.name) == {
        "j": ("b", 6, "u"),
        "k": ("late", 3, "u"),
        "m": ("n", 9, "c"),
    }
    assert verify_table(spark, spec).passed


def test_a_live_tombstone_hides_a_late_version_and_verify_finds_a_row_older_than_one(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = upsert_table(make_table)
    writer = TableWriter(spark, spec, "cdc")
    commit_batch(writer, 0, records(spark, [("k", "a", 1, "c")]))
    commit_batch(writer, 1, records(spark, [("k", "a", 5, "d")]))
    assert expire_tombstones(writer, 1, datetime.now(UTC)).expired == 0  # within its retention
    commit_batch(writer, 2, records(spark, [("k", "late", 3, "u")]))
    entry = find_ledger_entry(spark, spec.name, "cdc", 2)
    assert entry is not None
    assert (entry.rows_after_horizon, entry.rows_ignored_older) == (0, 1)
    assert table_state(spark, spec.name) == {}
    assert verify_table(spark, spec).passed

    # A row put back by hand, older than the live tombstone of its key.
    spark.sql(
        f"INSERT INTO {spec.name} (id, name, seq, op, _lh_app_id, _lh_batch_id, _lh_ingested_at) "
        "VALUES ('k', 'by hand', 2, 'u', 'cdc', 0, current_timestamp())"
    )
    kinds = {f.kind for f in verify_table(spark, spec).findings}
    assert "resurrected" in kinds


CLI_CONFIG = """
[lakehouse]
home = "state"

[tables.tomb_customers]
schema = "id STRING NOT NULL, name STRING, seq BIGINT, op STRING"
keys = ["id"]
merge = "upsert"
sequence_by = "seq"
delete_when = "op = 'd'"
tombstone_retention = "10 days"

[pipelines.tomb_cdc]
table = "tomb_customers"
[pipelines.tomb_cdc.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""


def test_vacuum_counts_then_expires_old_tombstones_through_the_cli(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = tmp_path / "lakehouse.toml"
    config.write_text(CLI_CONFIG)
    (tmp_path / "landing").mkdir()
    changes = ['{"id": "k", "name": "a", "seq": 1, "op": "c"}', '{"id": "k", "seq": 5, "op": "d"}']
    for n, line in enumerate(changes):
        (tmp_path / "landing" / f"{n}.json").write_text(line + "\n")
    ingested = runner.invoke(app, ["ingest", "-c", str(config)])
    assert ingested.exit_code == 0, ingested.output

    fresh = runner.invoke(app, ["vacuum", "tomb_customers", "--dry-run", "-c", str(config)])
    assert fresh.exit_code == 0, fresh.output
    assert "tomb_customers_tombstones: dry run: no tombstone recorded before" in fresh.stdout
    # The delete was recorded 11 days ago: past its 10-day retention.
    spark.sql(
        "UPDATE tomb_customers_tombstones SET _lh_ingested_at = _lh_ingested_at - INTERVAL 11 DAYS"
    )
    dry = runner.invoke(app, ["vacuum", "tomb_customers", "--dry-run", "-c", str(config)])
    done = runner.invoke(app, ["vacuum", "tomb_customers", "-c", str(config)])

    assert dry.exit_code == 0, dry.output
    assert "dry run: 1 tombstone(s) recorded before" in dry.stdout
    assert done.exit_code == 0, done.output
    assert "1 tombstone(s) recorded before" in done.stdout
    assert "expired; horizon 5" in done.stdout
    assert spark.table("tomb_customers_tombstones").count() == 0
    status = runner.invoke(app, ["status", "tomb_customers", "-f", "json", "-c", str(config)])
    assert status.exit_code == 0, status.output
    [row] = json.loads(status.stdout)
    assert (row["tombstone_retention"], row["tombstone_horizon"]) == ("10 days", "5")
