"""`lakehouse sql` is read-only by default: the guard judges Spark's analysed plan (finding 8)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app

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


ALLOWED = [
    "SELECT * FROM ro_canary",
    "select count(*) AS n from ro_canary where id > 0",
    "WITH c AS (SELECT id FROM ro_canary) SELECT * FROM c",
    "SELECT * FROM ro_canary WHERE id IN (SELECT id FROM ro_canary)",
    "SELECT EXISTS (SELECT 1 FROM ro_canary) AS e",
    "SELECT (SELECT max(id) FROM ro_canary) AS m",
    "SELECT * FROM ro_view",
    "SELECT * FROM range(3)",
    "SELECT 'root:x:0:0' AS a, '[/]' AS b",
    "SHOW TABLES",
    "SHOW DATABASES",
    "SHOW COLUMNS IN ro_canary",
    "SHOW TBLPROPERTIES ro_canary",
    "SHOW VIEWS",
    "SHOW FUNCTIONS LIKE 'abs'",
    "DESCRIBE ro_canary",
    "DESCRIBE TABLE EXTENDED ro_canary",
    "DESCRIBE HISTORY ro_canary",
    "DESCRIBE DETAIL ro_canary",
    "EXPLAIN SELECT * FROM ro_canary",
    "EXPLAIN INSERT INTO ro_canary VALUES (3, 'c')",
    "USE default",
    "SELECT id, sum(id) OVER (ORDER BY id) FROM ro_canary",
]

REFUSED = [
    ("INSERT INTO ro_canary VALUES (2, 'b')", "another command"),
    ("INSERT OVERWRITE TABLE ro_canary SELECT * FROM ro_canary", "another command"),
    ("DELETE FROM ro_canary", "another command"),
    ("UPDATE ro_canary SET s = 'x'", "another command"),
    (
        "MERGE INTO ro_canary t USING ro_canary s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "another command",
    ),
    (
        "INSERT OVERWRITE DIRECTORY '/tmp/lakehouse-ro-test' USING parquet SELECT 1",
        "another command",
    ),
    ("TRUNCATE TABLE ro_canary", "another command"),
    ("DROP TABLE ro_canary", "another command"),
    ("DROP VIEW ro_view", "another command"),
    ("CREATE TABLE ro_new (id INT) USING delta", "another command"),
    ("CREATE TABLE ro_ctas USING delta AS SELECT * FROM ro_canary", "another command"),
    ("CREATE VIEW ro_v2 AS SELECT 1", "another command"),
    ("ALTER TABLE ro_canary ADD COLUMNS (x INT)", "another command"),
    ("ALTER TABLE ro_canary SET TBLPROPERTIES ('a' = 'b')", "another command"),
    ("CREATE FUNCTION ro_f AS 'x.Y' USING JAR '/tmp/x.jar'", "another command"),
    ("CREATE TEMPORARY FUNCTION ro_f AS 'x.Y'", "another command"),
    ("SET spark.databricks.delta.retentionDurationCheck.enabled = false", "another command"),
    ("RESET", "another command"),
    ("ADD JAR /tmp/x.jar", "another command"),
    ("ADD FILE /etc/passwd", "another command"),
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "reflect"),
    ("SELECT java_method('java.lang.Math', 'abs', -1)", "java_method"),
    ("SELECT try_reflect('java.lang.Math', 'abs', -1)", "reflect"),
    ("WITH c AS (SELECT reflect('java.lang.Math', 'abs', -1) AS r) SELECT * FROM c", "reflect"),
    ("SELECT * FROM ro_canary WHERE s IN (SELECT java_method('a', 'b'))", "java_method"),
    ("SELECT * FROM ro_reflect", "reflect"),
    ("SELECT * FROM text.`/etc/passwd`", "outside the lakehouse home"),
    ("SELECT * FROM json.`/etc`", "outside the lakehouse home"),
    ("SELECT * FROM ro_passwd", "outside the lakehouse home"),
    ("CACHE TABLE ro_canary", "another command"),
    ("VACUUM ro_canary", "another command"),
    ("OPTIMIZE ro_canary", "another command"),
    ("SELECT 1; DROP TABLE ro_canary", "SQL failed"),
    ("SELECT TRANSFORM(id) USING 'sh -c \"touch /tmp/lakehouse-ro-test\"' FROM ro_canary", "shell"),
]


def test_the_table_holds_at_least_thirty_statements() -> None:
    assert len(ALLOWED) + len(REFUSED) >= 30
    assert len({s for s, _ in REFUSED} | set(ALLOWED)) == len(ALLOWED) + len(REFUSED)


@pytest.mark.parametrize("statement", ALLOWED)
def test_reads_run(spark: SparkSession, tables: str, statement: str) -> None:
    result = runner.invoke(app, ["sql", statement, "--format", "json"])

    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("statement", "reason"), REFUSED)
def test_everything_else_is_refused_in_one_line(
    spark: SparkSession, tables: str, statement: str, reason: str
) -> None:
    result = runner.invoke(app, ["sql", statement])

    assert result.exit_code == 1, result.output
    assert reason in result.stderr
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
