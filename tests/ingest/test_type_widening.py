"""Type widening (`type_widening = true`): a column widens in place for values it cannot hold.

JSON files are read with the stream's reader (the config's schema, the floor) and committed with
`commit_batch`, as a run does; the table's values are checked against the records as written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DecimalType, IntegerType

from ingest.cli.commands import declared_status
from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.config import load_config
from ingest.config.model import LakehouseConfig
from ingest.sources.file_read import read_files
from ingest.sources.files import FileSource
from tables.delta.evolve import widen_columns
from tables.delta.history import read_ledger, table_version
from tables.delta.ledger import admin_metadata
from tables.delta.writer import TableWriter
from tables.errors import ConfigError, InjectedFaultError
from tables.faults import ENV_VAR
from tables.spec import TableSpec

pytestmark = pytest.mark.evolution

MakeTable = Callable[..., TableSpec]
SCHEMA = "id STRING NOT NULL, qty INT, price DECIMAL(6, 1), ratio FLOAT"
FIRST: list[dict[str, Any]] = [{"id": "a", "qty": 1, "price": 10.5, "ratio": 0.5}]
WIDE: list[dict[str, Any]] = [
    {"id": "b", "qty": 3_000_000_000, "price": 123456.5, "ratio": 1e39},
    {"id": "c", "qty": 12345678901234567890, "price": 1.0},
    {"id": "d", "qty": "many"},
]


def land(
    spark: SparkSession, spec: TableSpec, tmp_path: Path, batch_id: int, rows: list[dict[str, Any]]
) -> BatchResult:
    """Land `rows` as one JSON file, read with the spec's schema, and commit it as `batch_id`."""
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    path = landing / f"{batch_id}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    batch = read_files(
        spark, FileSource(str(landing), "json"), spec.data_schema(spark), [str(path)]
    )
    writer = TableWriter(spark, spec, "widening")
    return commit_batch(writer, batch_id, batch, CommitOptions(raw_format="json"))


def values(spark: SparkSession, table: str) -> dict[str, tuple[Any, ...]]:
    return {r["id"]: (r["qty"], r["price"], r["ratio"]) for r in spark.table(table).collect()}


def reasons(spark: SparkSession, spec: TableSpec) -> list[str]:
    return sorted(r[0] for r in spark.table(spec.quarantine_name).select("_lh_reason").collect())


def test_values_too_wide_for_their_columns_widen_them_once_and_land_exactly(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), type_widening=True)
    land(spark, spec, tmp_path, 0, FIRST)

    wide = land(spark, spec, tmp_path, 1, WIDE)
    later = land(spark, spec, tmp_path, 2, [{"id": "e", "qty": 5_000_000_000, "price": 99999.5}])

    types = {f.name: f.dataType.simpleString() for f in spark.table(spec.name).schema.fields}
    assert (types["qty"], types["price"], types["ratio"]) == ("bigint", "decimal(7,1)", "double")
    assert values(spark, spec.name) == {
        "a": (1, Decimal("10.5"), 0.5),
        "b": (3_000_000_000, Decimal("123456.5"), 1e39),
        "e": (5_000_000_000, Decimal("99999.5"), None),
    }
    assert (wide.rows_inserted, wide.rows_quarantined) == (1, 2)
    assert later.rows_inserted == 1  # read with the table's types: no second widening
    quarantined = reasons(spark, spec)
    assert quarantined[0].startswith("wrong type: column qty value '12345678901234567890'")
    assert quarantined[1].startswith("wrong type: column qty value 'many'")
    schema_entries = [e for e in read_ledger(spark, spec.name) if e.meta.kind == "schema"]
    widened = {k: v for e in schema_entries for k, v in e.meta.source["widened_columns"].items()}
    assert widened == {"qty": "bigint", "price": "decimal(7,1)", "ratio": "double"}
    assert {e.meta.batch_id for e in schema_entries} == {1}  # one commit per column


def test_without_the_opt_in_a_value_too_wide_is_quarantined_with_its_reason(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    result = land(spark, spec, tmp_path, 0, WIDE[:1])

    assert (result.rows_inserted, result.rows_quarantined) == (0, 1)
    assert spark.table(spec.name).schema["qty"].dataType.simpleString() == "int"
    assert reasons(spark, spec)[0].startswith("wrong type: column qty value '3000000000'")


def test_a_crash_between_the_widening_and_the_data_commit_re_runs_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), type_widening=True)
    land(spark, spec, tmp_path, 0, FIRST)
    monkeypatch.setenv(ENV_VAR, "after_schema_commit:raise@1")
    with pytest.raises(InjectedFaultError):
        land(spark, spec, tmp_path, 1, WIDE[:1])
    assert spark.table(spec.name).schema["qty"].dataType.simpleString() == "bigint"
    monkeypatch.delenv(ENV_VAR)

    again = land(spark, spec, tmp_path, 1, WIDE[:1])
    resent = land(spark, spec, tmp_path, 1, WIDE[:1])

    assert (again.status, again.rows_inserted) == ("committed", 1)
    config = LakehouseConfig(None, tmp_path, spec.replay_window, {spec.name: spec}, {})
    assert declared_status(spark, config, spec.name)["widened_columns"] == {
        "qty": "bigint",
        "price": "decimal(7,1)",
        "ratio": "double",
    }
    assert resent.status == "skipped"
    assert values(spark, spec.name)["b"] == (3_000_000_000, Decimal("123456.5"), 1e39)
    assert [e.meta.kind for e in read_ledger(spark, spec.name)].count("schema") == 3  # not again


def test_type_widening_is_a_boolean_for_json_records(tmp_path: Path) -> None:
    config = tmp_path / "lakehouse.toml"
    table = '[tables.t]\nschema = "id STRING, qty INT"\nkeys = ["id"]\n'
    config.write_text(table + 'type_widening = "yes"\n')
    with pytest.raises(ConfigError, match=r"tables\.t\.type_widening: expected true or false"):
        load_config(config)
    csv = '[pipelines.p]\ntable = "t"\n[pipelines.p.source]\nformat = "csv"\npath = "in"\n'
    config.write_text(table + "type_widening = true\n" + csv)
    with pytest.raises(ConfigError, match="type_widening needs JSON records"):
        load_config(config)
    config.write_text(table + "type_widening = true\n")
    assert load_config(config).tables["t"].type_widening
    upsert = 'merge = "upsert"\nsequence_by = "qty"\nhistory = "scd2"\n'
    config.write_text(table + upsert + "track_history_columns = []\n")
    with pytest.raises(ConfigError, match=r"track_history_columns: is empty"):
        load_config(config)


def test_a_widening_another_writer_went_past_is_left_as_it_is(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """Two writers widening one column at once: the one that finds the column at least as wide
    as it wants commits nothing and parses with the table's type."""
    spec = make_table(schema=SCHEMA, keys=("id",), type_widening=True)
    meta = admin_metadata("widening", 0, "schema", {})
    assert widen_columns(spark, spec.name, {"price": DecimalType(9, 1)}, meta) == ["price"]
    version = table_version(spark, spec.name)

    late = widen_columns(spark, spec.name, {"price": DecimalType(7, 1), "qty": IntegerType()}, meta)

    assert late == []
    assert table_version(spark, spec.name) == version
    assert spark.table(spec.name).schema["price"].dataType == DecimalType(9, 1)
