"""Expectation suites through Great Expectations: warn, quarantine and fail, with exact counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from ingest.admin.replay import ReplayOptions, plan_replay, replay_batch
from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.config import PipelineSpec
from ingest.runner import RunOptions, run_pipeline
from ingest.sources import FileSource
from quality.check_results import recent_results
from quality.expectations import ExpectationGate, quarantine_reasons, should_stop
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batch
from tables.delta.writer import TableWriter
from tables.errors import ExpectationFailedError, InjectedFaultError
from tables.spec import ExpectationSpec, TableSpec

MakeTable = Callable[..., TableSpec]
SCHEMA = "event_id STRING NOT NULL, kind STRING, amount DOUBLE"


def rows_with(bad: dict[int, dict[str, Any]], count: int = 10) -> list[dict[str, Any]]:
    """`count` good events e0..e9, with the fields of `bad` overriding some of them."""
    return [
        {"event_id": f"e{i}", "kind": "click", "amount": 1.0, **bad.get(i, {})}
        for i in range(count)
    ]


def expect(table: str, check: str, column: str, action: str, **params: Any) -> ExpectationSpec:
    return ExpectationSpec(table, check, column, action, params)  # type: ignore[arg-type]


def make_spec(make_table: MakeTable, *rules: tuple[str, str, str, dict[str, Any]]) -> TableSpec:
    probe = make_table(schema=SCHEMA)
    expectations = tuple(expect(probe.name, c, col, a, **p) for c, col, a, p in rules)
    return TableSpec(probe.name, SCHEMA, ("event_id",), expectations=expectations)


def run_json(
    spark: SparkSession, spec: TableSpec, tmp_path: Path, batch: list[dict[str, Any]]
) -> Any:
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    (landing / f"{len(list(landing.iterdir()))}.json").write_text(
        "\n".join(json.dumps(r) for r in batch) + "\n"
    )
    job = PipelineSpec(
        name="gx",
        table=spec.name,
        app_id="gx",
        source=FileSource(str(landing), "json"),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    return run_pipeline(spark, job, spec, RunOptions(quality_dir=tmp_path / "gx"))


def event_ids(spark: SparkSession, table: str) -> list[str]:
    return sorted(r[0] for r in spark.table(table).select("event_id").collect())


def test_warn_commits_every_row_and_records_the_failure(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_spec(make_table, ("between", "amount", "warn", {"min": 0}))
    bad = {i: {"amount": -1.0} for i in (2, 5, 7)}

    report = run_json(spark, spec, tmp_path, rows_with(bad))

    assert report.rows_inserted == 10
    assert report.rows_quarantined == 0
    [result] = [
        r for r in recent_results(spark, spec.name, 10) if r["check_name"].startswith("expect:")
    ]
    assert (result["check_name"], result["status"], result["action"]) == (
        "expect:between(amount)",
        "failed",
        "warn",
    )
    assert (result["checked_keys"], result["failing_keys"]) == (10, 3)
    assert result["sample_keys"] == ["e2", "e5", "e7"]
    assert report.docs_url is not None
    assert Path(report.docs_url.removeprefix("file://")).is_file()


def test_quarantine_splits_the_batch_by_row_and_names_each_expectation(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_spec(
        make_table,
        ("in_set", "kind", "quarantine", {"values": ["click", "view"]}),
        ("regex", "event_id", "quarantine", {"pattern": "^e[0-9]+$"}),
        ("between", "amount", "warn", {"max": 100}),
    )
    bad = {1: {"kind": "hover"}, 4: {"kind": "swipe", "event_id": "E-4"}, 6: {"event_id": "x6"}}

    report = run_json(spark, spec, tmp_path, rows_with(bad))

    assert (report.rows_inserted, report.rows_quarantined) == (7, 3)
    assert event_ids(spark, spec.name) == ["e0", "e2", "e3", "e5", "e7", "e8", "e9"]
    reasons = {
        json.loads(r["_lh_raw"])["event_id"]: r["_lh_reason"]
        for r in spark.table(spec.quarantine_name).collect()
    }
    assert reasons == {
        "e1": "expectation failed: in_set(kind)",
        "E-4": "expectation failed: in_set(kind), regex(event_id)",
        "x6": "expectation failed: regex(event_id)",
    }
    [entry] = read_ledger(spark, spec.name)
    assert [(c["check"], c["status"], c["failing"]) for c in entry.meta.checks] == [
        ("expect:in_set(kind)", "failed", 2),
        ("expect:regex(event_id)", "failed", 2),
        ("expect:between(amount)", "passed", 0),
    ]


def test_fail_commits_nothing_and_stops_naming_the_expectation(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_spec(
        make_table,
        ("not_null", "kind", "fail", {}),
        ("between", "amount", "quarantine", {"min": 0}),
    )
    bad = {3: {"kind": None}, 8: {"amount": -5.0}}

    with pytest.raises(ExpectationFailedError, match=r"not_null\(kind\) \(1 of 10 rows, e.g. e3\)"):
        run_json(spark, spec, tmp_path, rows_with(bad))

    assert spark.table(spec.name).count() == 0
    assert committed_batch(spark, spec.name, "gx") is None
    assert not spark.catalog.tableExists(spec.quarantine_name) or (
        spark.table(spec.quarantine_name).count() == 0
    )
    recorded = {r["check_name"]: r["status"] for r in recent_results(spark, spec.name, 10)}
    assert recorded == {"expect:not_null(kind)": "failed", "expect:between(amount)": "failed"}


def frame(spark: SparkSession, batch: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(
        [(r["event_id"], r["kind"], r["amount"]) for r in batch], SCHEMA.replace(" NOT NULL", "")
    )


def test_a_quarantining_batch_retried_after_a_crash_keeps_one_copy_of_each_row(
    spark: SparkSession, make_table: MakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec(make_table, ("between", "amount", "quarantine", {"min": 0}))
    batch = rows_with({i: {"amount": -1.0} for i in (0, 9)})
    gate = ExpectationGate(spec)

    monkeypatch.setenv("LAKEHOUSE_FAULT", "before_write:raise")
    with pytest.raises(InjectedFaultError):
        commit_batch(
            TableWriter(spark, spec, "app"),
            0,
            frame(spark, batch),
            CommitOptions(gate=gate, max_attempts=1),
        )
    assert spark.table(spec.quarantine_name).count() == 2
    assert spark.table(spec.name).count() == 0
    monkeypatch.delenv("LAKEHOUSE_FAULT")
    result = commit_batch(
        TableWriter(spark, spec, "app"), 0, frame(spark, batch), CommitOptions(gate=gate)
    )

    assert (result.rows_inserted, result.rows_quarantined) == (8, 2)
    assert spark.table(spec.quarantine_name).count() == 2
    assert event_ids(spark, spec.name) == [f"e{i}" for i in range(1, 9)]


def test_a_replay_of_a_quarantining_batch_leaves_one_copy_of_each_quarantined_row(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_spec(make_table, ("between", "amount", "quarantine", {"min": 0}))
    run_json(spark, spec, tmp_path, rows_with({i: {"amount": -1.0} for i in (0, 9)}))
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id = 'e4'")

    source = FileSource(str(tmp_path / "landing"), "json")
    [plan] = plan_replay(spark, spec, "gx", 0, 0, source)
    replayed = replay_batch(
        TableWriter(spark, spec, plan.entry.meta.app_id),
        plan,
        ReplayOptions(gate=ExpectationGate(spec)),
    )

    assert (replayed.rows_restored, replayed.rows_already_present) == (1, 7)
    assert replayed.rows_rejected == 2
    assert event_ids(spark, spec.name) == [f"e{i}" for i in range(1, 9)]
    quarantined = sorted(
        json.loads(r["_lh_raw"])["event_id"] for r in spark.table(spec.quarantine_name).collect()
    )
    assert quarantined == ["e0", "e9"]


def test_gate_decisions_are_pure_functions_of_the_outcome(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_spec(
        make_table,
        ("between", "amount", "quarantine", {"min": 0}),
        ("in_set", "kind", "warn", {"values": ["click"]}),
    )
    rows = frame(spark, rows_with({2: {"amount": -1.0}, 3: {"kind": "view"}}))
    hashed = rows.selectExpr("*", "xxhash64(event_id, kind, amount) AS _lh_row_hash")

    outcome = ExpectationGate(spec).validate(hashed)

    assert not should_stop(outcome)
    [(row, reason)] = quarantine_reasons(outcome).items()
    assert reason == "expectation failed: between(amount)"
    assert row == hashed.where("event_id = 'e2'").first()["_lh_row_hash"]
