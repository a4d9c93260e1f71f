"""`lakehouse sql` is read-only by default: the guard judges Spark's analysed plan (finding 8)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from tests.support.hostile_sql import READS
from tests.support.hostile_sql import REFUSED as HOSTILE_REFUSED

runner = CliRunner()


@pytest.fixture(scope="module")
def tables(spark: SparkSession) -> str:
    """A sentinel table, a harmless view, and two views that hide refused reads; the home."""
    spark.sql("CREATE TABLE IF NOT EXISTS ro_canary (id INT, s STRING) USING delta")
    spark.sql("INSERT INTO ro_canary VALUES (1, 'a')")
    spark.sql("CREATE OR REPLACE VIEW ro_view AS SELECT id FROM ro_canary")
    spark.sql(
        "CREATE OR REPLACE VIEW ro_reflect AS "
        "SELECT reflect('java.lang.System', 'getProperty', 'user.home') AS h"
    )
    spark.sql("CREATE OR REPLACE VIEW ro_passwd AS SELECT * FROM text.`/etc/passwd`")
    location = spark.sql("DESCRIBE DETAIL ro_canary").collect()[0]["location"]
    return str(location)


#: The corpus's statements on this module's table, and those that need its views.
OUTSIDE = "/etc/passwd"
ALLOWED = [
    *(s.on("ro_canary", "id", OUTSIDE) for s in READS if s.text is None),
    "SELECT * FROM ro_canary WHERE id IN (SELECT id FROM ro_canary)",
    "SELECT * FROM ro_view",
    "SELECT id, sum(id) OVER (ORDER BY id) FROM ro_canary",
]
TEXTS = [(s.on("ro_canary", "id", OUTSIDE), s.text) for s in READS if s.text is not None]
REFUSED = [
    *((s.on("ro_canary", "id", OUTSIDE), s.reason) for s in HOSTILE_REFUSED),
    ("DROP VIEW ro_view", "another command"),
    ("SELECT * FROM ro_reflect", "reflect"),
    ("SELECT * FROM ro_passwd", "outside the lakehouse home"),
    ("SELECT 1; DROP TABLE ro_canary", "SQL failed"),
]


def test_the_table_holds_at_least_thirty_statements() -> None:
    assert len(ALLOWED) + len(REFUSED) >= 30
    assert len({s for s, _ in REFUSED} | set(ALLOWED)) == len(ALLOWED) + len(REFUSED)


@pytest.mark.parametrize("statement", ALLOWED)
def test_reads_run(spark: SparkSession, tables: str, statement: str) -> None:
    result = runner.invoke(app, ["sql", statement, "--format", "json"])

    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("statement", "text"), TEXTS)
def test_variables_stay_text(spark: SparkSession, tables: str, statement: str, text: str) -> None:
    result = runner.invoke(app, ["sql", statement, "--format", "csv"])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["v", text]


@pytest.mark.parametrize(("statement", "reason"), REFUSED)
def test_everything_else_is_refused_in_one_line(
    spark: SparkSession, tables: str, statement: str, reason: str
) -> None:
    result = runner.invoke(app, ["sql", statement])

    assert result.exit_code == 1, result.output
    assert reason in result.stderr
    assert reason == "SQL failed" or result.stderr.startswith("error: refused: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert spark.table("ro_canary").count() == 1
    assert spark.catalog.tableExists("ro_view")
    assert not Path("/tmp/lakehouse-ro-test").exists()


def test_a_path_relation_inside_the_home_is_a_read(spark: SparkSession, tables: str) -> None:
    result = runner.invoke(app, ["sql", f"SELECT count(*) AS n FROM delta.`{tables}`", "-f", "csv"])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["n", "1"]


def test_allow_writes_asks_first_and_yes_answers(spark: SparkSession, tables: str) -> None:
    statement = "INSERT INTO ro_canary VALUES (9, 'operator')"
    declined = runner.invoke(app, ["sql", statement, "--allow-writes"], input="n\n")
    assert declined.exit_code == 1
    assert "not read-only" in declined.output
    assert spark.table("ro_canary").count() == 1

    done = runner.invoke(app, ["sql", statement, "--allow-writes", "--yes"])
    assert done.exit_code == 0, done.output
    assert spark.table("ro_canary").where("id = 9").count() == 1
    spark.sql("DELETE FROM ro_canary WHERE id = 9")


def test_allow_writes_runs_reads_without_asking(spark: SparkSession, tables: str) -> None:
    result = runner.invoke(app, ["sql", "SELECT 1 AS one", "--allow-writes", "-f", "json"])

    assert result.exit_code == 0, result.output
    assert "not read-only" not in result.output
