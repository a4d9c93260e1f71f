"""`lakehouse changes` and `enable-changes`: a table's change data feed read by version range."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.commit import commit_batch
from tables.delta.changes import change_range, feed_start, is_change_feed_on
from tables.delta.writer import TableWriter
from tables.errors import ChangeFeedError
from tables.spec import TableSpec

pytestmark = pytest.mark.downstream

MakeTable = Callable[..., TableSpec]
runner = CliRunner()
SCHEMA = "event_id string, user_id string, amount double"


def commit(spark: SparkSession, spec: TableSpec, batch_id: int, ids: list[str]) -> None:
    rows = [(i, "u", 1.0) for i in ids]
    commit_batch(TableWriter(spark, spec, "app"), batch_id, spark.createDataFrame(rows, SCHEMA))


def test_the_feed_is_on_only_when_the_property_is_true() -> None:
    assert is_change_feed_on({"delta.enableChangeDataFeed": "TRUE"})
    assert not is_change_feed_on({"delta.enableChangeDataFeed": "false"})
    assert not is_change_feed_on({})


def test_a_change_range_is_pinned_and_one_past_the_latest_is_empty() -> None:
    assert change_range("t", 2, None, 5) == change_range("t", 2, 5, 5)
    assert change_range("t", 6, None, 5).is_empty
    for since, until, message in (
        (7, None, "--since 7 is past its latest version, 5"),
        (2, 6, "--until 6 is past its latest version, 5"),
        (4, 3, "--until 3 is below --since 4"),
    ):
        with pytest.raises(ChangeFeedError, match=message):
            change_range("t", since, until, 5)


def test_the_feed_starts_at_the_newest_commit_that_turned_it_on() -> None:
    history = [
        {"version": 4, "operationParameters": {"mode": "Append"}},
        {
            "version": 3,
            "operationParameters": {"properties": '{"delta.enableChangeDataFeed":"true"}'},
        },
        {"version": 0, "operationParameters": {"properties": "{}"}},
    ]
    assert feed_start(history) == 3
    assert feed_start(history[:1]) is None


def test_changes_prints_the_inserts_of_a_version_range(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    commit(spark, spec, 0, ["e1", "e2"])  # version 1
    commit(spark, spec, 1, ["e3"])  # version 2

    first = runner.invoke(app, ["changes", spec.name, "--since", "1", "--until", "1", "-f", "json"])
    rest = runner.invoke(app, ["changes", spec.name, "--since", "2", "-f", "csv"])
    nothing = runner.invoke(app, ["changes", spec.name, "--since", "3", "-f", "json"])

    assert first.exit_code == 0, first.output
    rows = json.loads(first.stdout)
    assert sorted(r["event_id"] for r in rows) == ["e1", "e2"]
    assert {(r["_change_type"], r["_commit_version"], r["_lh_batch_id"]) for r in rows} == {
        ("insert", 1, 0)
    }
    assert list(rows[0])[:3] == ["_commit_version", "_change_type", "_commit_timestamp"]
    assert (
        first.stderr.strip() == f"changes of {spec.name}: versions 1 to 1, 2 row(s); next --since 2"
    )
    assert rest.exit_code == 0, rest.output
    assert rest.stdout.splitlines()[1].startswith("2,insert,")
    assert "versions 2 to 2, 1 row(s); next --since 3" in rest.stderr
    assert nothing.exit_code == 0, nothing.output
    assert json.loads(nothing.stdout) == []
    assert nothing.stderr.strip() == f"changes of {spec.name}: no version after 2; next --since 3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "9"], "--since 9 is past its latest version, 1"),
        (["--since", "0", "--until", "9"], "--until 9 is past its latest version, 1"),
    ],
)
def test_versions_that_do_not_exist_are_one_line(
    spark: SparkSession, make_table: MakeTable, args: list[str], message: str
) -> None:
    spec = make_table()
    commit(spark, spec, 0, ["e1"])
    result = runner.invoke(app, ["changes", spec.name, *args])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: table {spec.name}: {message}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_table_without_the_feed_names_the_fix_and_enable_changes_turns_it_on(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table(properties={"delta.enableChangeDataFeed": "false"})
    commit(spark, spec, 0, ["e1"])  # version 1, no change data

    off = runner.invoke(app, ["changes", spec.name, "--since", "0"])
    enabled = runner.invoke(app, ["enable-changes", spec.name])
    commit(spark, spec, 1, ["e2", "e3"])  # version 3
    too_early = runner.invoke(app, ["changes", spec.name, "--since", "1"])
    read = runner.invoke(app, ["changes", spec.name, "--since", "2", "-f", "json"])
    again = runner.invoke(app, ["enable-changes", spec.name])

    assert off.exit_code == 1
    assert off.stderr.strip() == (
        f"error: table {spec.name}: its change data feed is off (delta.enableChangeDataFeed is "
        f"not true); turn it on with `lakehouse enable-changes {spec.name}` (changes are "
        "recorded from then on, not before)"
    )
    assert enabled.exit_code == 0, enabled.output
    assert enabled.stdout.strip() == (
        f"{spec.name}: change data feed on from version 2; read it with "
        f"`lakehouse changes {spec.name} --since 2`"
    )
    assert too_early.exit_code == 1
    assert "holds changes from version 2 on; read with --since 2 or later" in too_early.stderr
    assert len(too_early.stderr.strip().splitlines()) == 1
    assert read.exit_code == 0, read.output
    assert sorted(r["event_id"] for r in json.loads(read.stdout)) == ["e2", "e3"]
    assert again.stdout.startswith(f"{spec.name}: change data feed already on, since version 2")
