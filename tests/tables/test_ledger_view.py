"""The ledger as a view analysts query by name: `<table>_ledger` says what `history` says."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.commit import commit_batch
from tables.delta.history import read_ledger
from tables.delta.ledger_view import (
    LEDGER_COLUMNS,
    create_ledger_view,
    ledger_view_name,
    ledger_view_sql,
    should_have_ledger_view,
)
from tables.delta.table import table_detail
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
runner = CliRunner()


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("events", True),
        ("sales.events", True),
        ("events_quarantine", False),
        ("lakehouse_quality", False),
        ("events_ledger", False),
        ("sales.events_QUARANTINE", False),
    ],
)
def test_which_tables_get_a_ledger_view(table: str, expected: bool) -> None:
    assert should_have_ledger_view(table) is expected


def test_the_view_reads_the_commit_files_of_exactly_that_location_without_spark() -> None:
    statement = ledger_view_sql("sales.events", "file:/lh/warehouse/we`ird[1]/", replace=False)

    assert statement.startswith("CREATE VIEW IF NOT EXISTS `sales`.`events_ledger` AS")
    # Backticks doubled for the identifier, glob characters escaped so the path is literal.
    assert "FROM text.`file:/lh/warehouse/we``ird\\[1\\]/_delta_log/*.json`" in statement
    assert ledger_view_name("sales.events") == "sales.events_ledger"


def _rows(spark: SparkSession, table: str, app_id: str) -> list[tuple[object, ...]]:
    return [
        (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8])
        for d in spark.sql(
            f"SELECT version, app_id, batch_id, kind, rows_read, rows_inserted, "
            f"rows_duplicate_in_batch, rows_quarantined, content_hash "
            f"FROM {ledger_view_name(table)} WHERE app_id = '{app_id}' ORDER BY version DESC"
        ).collect()
    ]


def test_the_view_holds_each_commit_as_history_does(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()

    def batch(ids: list[str | None]) -> object:
        return spark.createDataFrame(
            [(i, "u", 1.0) for i in ids], "event_id string, user_id string, amount double"
        )

    commit_batch(TableWriter(spark, spec, "a"), 0, batch(["x", "y", "y", None]))
    commit_batch(
        TableWriter(spark, spec, "a"), 0, batch(["x", "y", "y", None])
    )  # skipped: no commit
    commit_batch(TableWriter(spark, spec, "a"), 1, batch([]))  # empty: marker and entry only
    commit_batch(TableWriter(spark, spec, "b"), 0, batch(["z"]))
    location = table_detail(spark, spec.name).location
    assert create_ledger_view(spark, spec.name, location) == f"{spec.name}_ledger"

    view = spark.table(ledger_view_name(spec.name))
    assert tuple(view.columns) == LEDGER_COLUMNS
    for app_id in ("a", "b"):
        expected = [
            (
                e.version,
                e.meta.app_id,
                e.meta.batch_id,
                e.meta.kind,
                e.meta.rows_read,
                e.rows_inserted,
                e.rows_duplicate_in_batch,
                e.meta.rows_quarantined,
                e.meta.content_hash,
            )
            for e in read_ledger(spark, spec.name, app_id=app_id)
        ]
        assert _rows(spark, spec.name, app_id) == expected
    first = _rows(spark, spec.name, "a")[-1]
    assert first[4:8] == (4, 2, 1, 1)  # read 4 = inserted 2 + copy 1 + quarantined 1


def test_an_analyst_queries_the_ledger_view_by_name_with_lakehouse_sql(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    batch = spark.createDataFrame(
        [("k", "u", 2.0)], "event_id string, user_id string, amount double"
    )
    commit_batch(TableWriter(spark, spec, "landing"), 0, batch)
    spark.sql(f"DROP VIEW IF EXISTS {spec.name}_ledger")

    result = runner.invoke(
        app,
        [
            "sql",
            f"SELECT app_id, batch_id, rows_inserted, audit_status FROM {spec.name}_ledger",
            "--format",
            "json",
        ],
    )

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"app_id": "landing", "batch_id": 0, "rows_inserted": 1, "audit_status": "passed"}
    ]
