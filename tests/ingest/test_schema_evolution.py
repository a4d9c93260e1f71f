"""Sources change: each `schema_evolution` mode against real Spark and Delta tables.

JSON files are read with the stream's reader (the config's schema) and committed with
`commit_batch`, batch after batch, as a run does. The tables are checked against an independent
fold of the same lines in Python: per record key, the record's fields by the types the module
docstring of `quality.evolution` gives them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.sources.files import FileSource, read_files
from quality.evolution import column_type, value_kind
from tables.delta.history import read_ledger, table_version
from tables.delta.writer import TableWriter
from tables.errors import ConfigError, InjectedFaultError, NewFieldsError
from tables.faults import ENV_VAR
from tables.spec import TableSpec

pytestmark = pytest.mark.evolution

MakeTable = Callable[..., TableSpec]
SCHEMA = "id STRING NOT NULL, qty INT"
APP = "evolving"

FIRST = [
    {"id": "a", "qty": 1, "score": 7, "ratio": 0.5, "flag": True, "tags": ["x", 1], "mixed": 1},
    {"id": "b", "qty": 2, "score": -3, "ratio": 2, "flag": False, "mixed": "two", "QTY": 9},
    {"id": "c", "qty": 3},
]
SECOND = [
    {"id": "d", "qty": 4, "score": 11, "late": "new"},
    {"id": "e", "qty": 5, "score": "not a number"},
    {"id": "f", "qty": 6, "ratio": None},
]
ADDED = {
    "score": "bigint",
    "ratio": "double",
    "flag": "boolean",
    "tags": "string",
    "mixed": "string",
}


def land(
    spark: SparkSession, spec: TableSpec, tmp_path: Path, batch_id: int, lines: list[str]
) -> BatchResult:
    """Land `lines` as one file and commit it as batch `batch_id` of APP."""
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    path = landing / f"{batch_id}.json"
    path.write_text("\n".join(lines) + "\n")
    source = FileSource(str(landing), "json")
    batch = read_files(spark, source, spec.data_schema(spark), [str(path)])
    writer = TableWriter(spark, spec, APP)
    return commit_batch(writer, batch_id, batch, CommitOptions(raw_format="json"))


def as_lines(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r) for r in records]


def folded(value: Any, kind: str) -> Any:
    """What a JSON value becomes in a column of `kind`, as Spark's JSON parser lands it."""
    if value is None:
        return None
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if kind == "double":
        return float(value)
    return value


def expected_rows(
    records: list[dict[str, Any]], columns: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """The fold: per id, each column's value (None where the record lacks it)."""
    return {
        r["id"]: {name: folded(r.get(name), kind) for name, kind in columns.items()}
        for r in records
    }


def table_rows(
    spark: SparkSession, spec: TableSpec, columns: list[str]
) -> dict[str, dict[str, Any]]:
    rows = spark.table(spec.name).select("id", *columns).collect()
    return {r["id"]: {c: r[c] for c in columns} for r in rows}


def column_types(spark: SparkSession, spec: TableSpec) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(spec.name).schema.fields}


def schema_entries(spark: SparkSession, spec: TableSpec) -> list[dict[str, Any]]:
    return [
        dict(e.meta.source) | {"batch_id": e.meta.batch_id}
        for e in read_ledger(spark, spec.name)
        if e.meta.kind == "schema"
    ]


def test_the_kinds_of_values_give_spark_s_inferred_types() -> None:
    assert [value_kind(v) for v in ('"x"', "17", "-3", "1.50", "1e3", "true", "null", "[1]")] == [
        "string",
        "integer",
        "integer",
        "number",
        "number",
        "boolean",
        "null",
        "json",
    ]
    assert value_kind("1" * 19) == "json"  # past a BIGINT's sure range: kept as text
    assert column_type(["integer", "null"]).simpleString() == "bigint"
    assert column_type(["integer", "number"]).simpleString() == "double"
    assert column_type(["boolean"]).simpleString() == "boolean"
    assert column_type(["integer", "string"]).simpleString() == "string"
    assert column_type(["null"]).simpleString() == "string"


def test_add_columns_lands_new_fields_in_new_columns_then_keeps_filling_them(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), schema_evolution="add_columns")

    first = land(spark, spec, tmp_path, 0, as_lines(FIRST))

    assert (first.status, first.rows_inserted, first.rows_quarantined) == ("committed", 3, 0)
    types = column_types(spark, spec)
    assert {name: types[name] for name in ADDED} == ADDED
    columns = {"qty": "int", **ADDED}
    assert table_rows(spark, spec, list(columns)) == expected_rows(FIRST, columns)
    rescued = {r["id"]: r["_lh_rescued"] for r in spark.table(spec.name).collect()}
    # Only what no added column holds stays rescued: a case variant, a converted value.
    assert rescued["b"] == '{"fields":{"QTY":9}}'
    assert rescued["a"] == '{"converted":{"tags":["x",1],"mixed":1}}'
    assert rescued["c"] is None
    [entry] = schema_entries(spark, spec)
    assert entry == {"added_columns": ADDED, "batch_id": 0}

    # The next batch is read with the config's schema, as a run that started before it does.
    second = land(spark, spec, tmp_path, 1, as_lines(SECOND))

    assert (second.rows_inserted, second.rows_quarantined) == (2, 1)
    assert column_types(spark, spec)["late"] == "string"
    columns = {**columns, "late": "string"}
    landed = [r for r in SECOND if r["id"] != "e"]
    assert table_rows(spark, spec, list(columns)) == expected_rows([*FIRST, *landed], columns)
    [reason] = [r["_lh_reason"] for r in spark.table(spec.quarantine_name).collect()]
    assert reason.startswith("field score does not convert to bigint")
    assert [e["batch_id"] for e in schema_entries(spark, spec)] == [1, 0]


def test_a_crash_between_the_schema_commit_and_the_data_commit_re_runs_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), schema_evolution="add_columns")
    monkeypatch.setenv(ENV_VAR, "after_schema_commit:raise@0")

    with pytest.raises(InjectedFaultError):
        land(spark, spec, tmp_path, 0, as_lines(FIRST))
    assert spark.table(spec.name).count() == 0
    assert {n: column_types(spark, spec)[n] for n in ADDED} == ADDED

    monkeypatch.delenv(ENV_VAR)
    again = land(spark, spec, tmp_path, 0, as_lines(FIRST))
    resent = land(spark, spec, tmp_path, 0, as_lines(FIRST))

    assert (again.status, again.rows_inserted) == ("committed", 3)
    assert resent.status == "skipped"
    columns = {"qty": "int", **ADDED}
    assert table_rows(spark, spec, list(columns)) == expected_rows(FIRST, columns)
    assert len(schema_entries(spark, spec)) == 1  # the re-run found its columns there


def test_fail_stops_the_batch_naming_the_new_fields(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), schema_evolution="fail")
    version = table_version(spark, spec.name)

    with pytest.raises(NewFieldsError) as caught:
        land(spark, spec, tmp_path, 0, as_lines(FIRST))

    error = caught.value
    assert error.fields == ("flag", "mixed", "ratio", "score", "tags")
    assert (error.table, error.app_id, error.batch_id) == (spec.name, APP, 0)
    assert "\n" not in str(error)
    assert "flag, mixed, ratio, score, tags" in str(error)
    assert table_version(spark, spec.name) == version
    # A batch without new fields lands; a case variant is no new field (unknown_fields has it).
    done = land(spark, spec, tmp_path, 0, ['{"id": "z", "qty": 1, "QTY": 2}'])
    assert (done.rows_inserted, done.rows_quarantined) == (1, 0)


def test_freeze_quarantines_the_rows_that_bring_new_fields(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), schema_evolution="freeze")
    before = column_types(spark, spec)

    result = land(spark, spec, tmp_path, 0, as_lines(FIRST))

    assert (result.rows_inserted, result.rows_quarantined) == (1, 2)
    assert column_types(spark, spec) == before
    assert table_rows(spark, spec, ["qty"]) == {"c": {"qty": 3}}
    reasons = sorted(r["_lh_reason"] for r in spark.table(spec.quarantine_name).collect())
    assert reasons == sorted(
        [
            "new field(s) flag, mixed, ratio, score: the table's schema_evolution is freeze",
            "new field(s) flag, mixed, ratio, score, tags: the table's schema_evolution is freeze",
        ]
    )


def test_an_unknown_mode_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"schema_evolution.*must be one of"):
        TableSpec("t", SCHEMA, ("id",), schema_evolution="evolve")  # type: ignore[arg-type]


CONFIG = """
[lakehouse]
home = "state"

[tables.evolving_cli]
schema = "id STRING NOT NULL, qty INT"
keys = ["id"]
schema_evolution = "{mode}"

[pipelines.evolving_cli]
table = "evolving_cli"

[pipelines.evolving_cli.source]
format = "{format}"
path = "landing"
"""


def test_the_cli_ingests_evolves_and_shows_the_added_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from ingest.cli.commands import app

    runner = CliRunner()
    config = tmp_path / "lakehouse.toml"
    config.write_text(CONFIG.format(mode="add_columns", format="json"))
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing" / "a.json").write_text("\n".join(as_lines(FIRST)) + "\n")

    ingested = runner.invoke(app, ["ingest", "--config", str(config)])
    status = runner.invoke(app, ["status", "evolving_cli", "-f", "json", "--config", str(config)])
    history = runner.invoke(app, ["history", "evolving_cli", "-f", "json", "--config", str(config)])

    assert ingested.exit_code == 0, ingested.output
    assert "3 rows inserted" in ingested.stdout
    [row] = json.loads(status.stdout)
    assert (row["schema_evolution"], row["added_columns"]) == ("add_columns", ADDED)
    kinds = {entry["kind"]: entry["source"] for entry in json.loads(history.stdout)}
    added = ", ".join(f"{n} {t}" for n, t in sorted(ADDED.items()))
    assert kinds["schema"] == f"added columns: {added}"

    config.write_text(CONFIG.format(mode="add_columns", format="csv"))
    refused = runner.invoke(app, ["status", "evolving_cli", "--config", str(config)])
    assert refused.exit_code != 0
    assert "tables.evolving_cli.schema_evolution" in refused.output
    assert "needs JSON records" in refused.output
    assert "Traceback" not in refused.output


def test_backfill_lands_values_rescued_before_their_column_existed_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    from dataclasses import replace

    from ingest.admin.backfill import backfill_rescued
    from tables.engine.clones import SessionClones

    spec = make_table(schema=SCHEMA, keys=("id",))  # rescue: new fields go to _lh_rescued
    early = [
        {"id": "a", "score": 7, "late": 1},
        {"id": "b", "score": "x"},
        {"id": "c", "qty": 1},
    ]
    land(spark, spec, tmp_path, 0, as_lines(early))
    evolving = replace(spec, schema_evolution="add_columns")
    land(spark, evolving, tmp_path, 1, as_lines([{"id": "d", "score": 9}]))

    report = backfill_rescued(spark, evolving, "score", SessionClones())
    again = backfill_rescued(spark, evolving, "score", SessionClones())

    assert (report.rows_backfilled, report.values_left) == (1, 1)
    assert (again.rows_backfilled, again.values_left, again.version) == (0, 1, None)
    rows = {r["id"]: (r["score"], r["_lh_rescued"]) for r in spark.table(spec.name).collect()}
    assert rows == {
        "a": (7, '{"fields":{"late":1}}'),
        "b": (None, '{"fields":{"score":"x"}}'),
        "c": (None, None),
        "d": (9, None),
    }
    kinds = [e.meta.kind for e in read_ledger(spark, spec.name)]
    assert kinds == ["backfill", "batch", "schema", "batch"]
    assert report.describe() == (
        f"{spec.name}: 1 row(s) backfilled into score; 1 value(s) left in _lh_rescued: they do "
        "not convert to the column's type"
    )


def test_two_writers_evolving_one_table_at_once_converge(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    """Two app ids bring the same new field at the same moment, as numbers and as text: one
    ALTER wins, the other writer finds the column there and lands against its type."""
    import threading

    spec = make_table(schema=SCHEMA, keys=("id",), schema_evolution="add_columns")
    records = {
        "nums": [{"id": f"n{i}", "qty": i, "shared": i} for i in range(4)],
        "text": [{"id": f"t{i}", "qty": i, "shared": f"s{i}"} for i in range(4)],
    }
    barrier = threading.Barrier(2)
    results: dict[str, BatchResult] = {}
    errors: list[BaseException] = []

    def write(app_id: str) -> None:
        try:
            folder = tmp_path / app_id
            folder.mkdir()
            path = folder / "0.json"
            path.write_text("\n".join(as_lines(records[app_id])) + "\n")
            source = FileSource(str(folder), "json")
            batch = read_files(spark, source, spec.data_schema(spark), [str(path)])
            barrier.wait()
            writer = TableWriter(spark, spec, app_id)
            results[app_id] = commit_batch(writer, 0, batch, CommitOptions(raw_format="json"))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=write, args=(app,)) for app in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)

    assert not errors, errors
    kind = column_types(spark, spec)["shared"]
    assert kind in ("bigint", "string")
    assert len(schema_entries(spark, spec)) == 1  # one ALTER won; the other found the column
    landed = {r["id"]: r["shared"] for r in spark.table(spec.name).collect()}
    quarantined = spark.table(spec.quarantine_name).count() if kind == "bigint" else 0
    if kind == "bigint":  # the text writer's values do not convert: quarantined, named
        assert landed == {f"n{i}": i for i in range(4)}
        assert quarantined == 4
    else:  # numbers land as their text in a STRING column (the original kept as converted)
        assert landed == {
            **{f"n{i}": str(i) for i in range(4)},
            **{f"t{i}": f"s{i}" for i in range(4)},
        }
    assert sum(r.rows_read for r in results.values()) == 8
