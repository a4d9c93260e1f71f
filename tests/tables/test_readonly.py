"""The read-only guard: Spark's analysed plan decides what `lakehouse sql` and `serve` run."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.delta.table import create_table
from tables.engine.confs import HOME_CONF
from tables.engine.readonly import read_only_session, refusal
from tables.spec import parse_struct

READING = [
    "SELECT * FROM ro_events",
    "SELECT count(*) FROM ro_events WHERE id IN (SELECT id FROM ro_events)",
    "WITH x AS (SELECT id FROM ro_events) SELECT * FROM x",
    "SELECT * FROM ro_events VERSION AS OF 0",
    "SELECT * FROM range(3)",
    "SHOW TABLES",
    "SHOW DATABASES",
    "SHOW COLUMNS IN ro_events",
    "SHOW TBLPROPERTIES ro_events",
    "SHOW FUNCTIONS",
    "SHOW VIEWS",
    "SHOW CATALOGS",
    "DESCRIBE ro_events",
    "DESCRIBE EXTENDED ro_events",
    "DESCRIBE DETAIL ro_events",
    "DESCRIBE HISTORY ro_events",
    "DESCRIBE FUNCTION abs",
    "DESCRIBE QUERY SELECT 1",
    "EXPLAIN SELECT * FROM ro_events",
    "EXPLAIN INSERT INTO ro_events VALUES (1)",
    "USE default",
]
REFUSED = {
    "INSERT INTO ro_events VALUES (1)": "AppendData",
    "INSERT OVERWRITE ro_events SELECT 1": "OverwriteByExpression",
    "DELETE FROM ro_events WHERE id = 1": "DeleteCommand",
    "UPDATE ro_events SET id = 2": "UpdateCommand",
    "MERGE INTO ro_events t USING ro_events s ON t.id = s.id WHEN MATCHED THEN DELETE": "Merge",
    "TRUNCATE TABLE ro_events": "Truncate",
    "DROP TABLE ro_events": "DropTable",
    "CREATE TABLE ro_other (a INT) USING delta": "CreateTable",
    "ALTER TABLE ro_events SET TBLPROPERTIES ('a' = 'b')": "SetTableProperties",
    "OPTIMIZE ro_events": "OptimizeTableCommand",
    "VACUUM ro_events": "VacuumTableCommand",
    "SET spark.databricks.delta.retentionDurationCheck.enabled = false": "SetCommand",
    "SET": "SetCommand",
    "RESET": "ResetCommand",
    "ADD JAR /tmp/x.jar": "AddJarsCommand",
    "ADD FILE /etc/passwd": "AddFilesCommand",
    "CREATE FUNCTION f AS 'x.Y' USING JAR '/tmp/x.jar'": "CreateFunctionCommand",
    "CREATE TEMPORARY VIEW v AS SELECT 1": "CreateViewCommand",
    "CACHE TABLE ro_events": "CacheTable",
    "CLEAR CACHE": "ClearCacheCommand",
    "REFRESH TABLE ro_events": "RefreshTable",
    "ANALYZE TABLE ro_events COMPUTE STATISTICS": "AnalyzeTable",
    "SELECT reflect('java.lang.System', 'getenv', 'HOME')": "reflect",
    "SELECT java_method('java.lang.System', 'getenv', 'HOME')": "java_method",
    "SELECT try_reflect('java.lang.System', 'getenv', 'HOME')": "reflect",
    "SELECT * FROM ro_events WHERE id = length(reflect('java.lang.System', 'getenv', 'X'))": (
        "reflect"
    ),
    "SELECT * FROM text.`/etc/passwd`": "outside the lakehouse home",
    "SELECT * FROM csv.`/etc/passwd`": "outside the lakehouse home",
    "SELECT * FROM ro_events WHERE id IN (SELECT length(value) FROM text.`/etc/hosts`)": (
        "outside the lakehouse home"
    ),
    "INSERT OVERWRITE DIRECTORY '/tmp/out' USING parquet SELECT 1": "InsertIntoDataSourceDir",
    "WITH x AS (SELECT 1 AS id) INSERT INTO ro_events SELECT * FROM x": "AppendData",
    "SELECT TRANSFORM(id) USING 'sh -c id' AS (a) FROM ro_events": "TRANSFORM",
    "SELECT * FROM ro_events WHERE id IN (SELECT TRANSFORM(1) USING 'cat' AS (a INT))": (
        "shell command"
    ),
}
#: Reading commands and relations that name a path-based table; {path} lies outside the home.
READING_A_PATH = [
    "SELECT * FROM delta.`{path}`",
    "DESCRIBE delta.`{path}`",
    "DESCRIBE EXTENDED delta.`{path}`",
    "DESCRIBE delta.`{path}` id",
    "DESCRIBE DETAIL delta.`{path}`",
    "DESCRIBE DETAIL '{path}'",
    "DESCRIBE HISTORY delta.`{path}`",
    "DESCRIBE HISTORY '{path}'",
    "SHOW COLUMNS IN delta.`{path}`",
    "SHOW TBLPROPERTIES delta.`{path}`",
    "DESCRIBE QUERY SELECT * FROM delta.`{path}`",
    "SELECT * FROM table_changes_by_path('{path}', 0)",
]


@pytest.fixture(scope="module")
def reader(spark: SparkSession) -> SparkSession:
    create_table(spark, "ro_events", parse_struct("id INT"))
    spark.sql("INSERT INTO ro_events VALUES (1), (2)")
    return read_only_session(spark)


@pytest.mark.parametrize("statement", READING)
def test_reading_statements_run(reader: SparkSession, statement: str) -> None:
    reader.sql(statement).limit(5).collect()


@pytest.mark.parametrize(("statement", "named"), sorted(REFUSED.items()))
def test_other_statements_are_refused_before_they_run(
    spark: SparkSession, reader: SparkSession, statement: str, named: str
) -> None:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Spark error type; text checked
        reader.sql(statement).collect()
    reason = refusal(caught.value)
    assert reason is not None, str(caught.value)[:300]
    assert named.lower() in reason.lower()
    assert "\n" not in reason
    assert spark.table("ro_events").count() == 2


def test_a_delta_table_by_path_outside_the_home_is_refused(
    spark: SparkSession, reader: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside-home") / "table"
    spark.range(2).write.format("delta").save(str(outside))
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Spark error type; text checked
        reader.sql(f"SELECT * FROM delta.`{outside}`").collect()
    assert "outside the lakehouse home" in (refusal(caught.value) or "")
    inside = spark.sql("DESCRIBE DETAIL ro_events").collect()[0]["location"]
    assert reader.sql(f"SELECT * FROM delta.`{inside}`").count() == 2


@pytest.fixture(scope="module")
def outside(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Delta table by path outside the home, with a change feed to read."""
    path = str(tmp_path_factory.mktemp("outside-home-cdf") / "table")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1)")
    return path


@pytest.mark.parametrize("template", READING_A_PATH)
def test_a_path_table_outside_the_home_is_refused_in_reading_commands_too(
    spark: SparkSession, reader: SparkSession, outside: str, template: str
) -> None:
    spark.sql(template.format(path=outside)).limit(1).collect()  # it runs where writes are allowed
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Spark error type; text checked
        reader.sql(template.format(path=outside)).collect()
    reason = refusal(caught.value) or str(caught.value)[:300]
    assert "outside the lakehouse home" in reason
    assert outside in reason


@pytest.mark.parametrize("template", READING_A_PATH)
def test_the_same_reading_commands_run_on_a_path_inside_the_home(
    spark: SparkSession, reader: SparkSession, template: str
) -> None:
    create_table(
        spark,
        "ro_cdf",
        parse_struct("id BIGINT"),
        properties={"delta.enableChangeDataFeed": "true"},
    )
    inside = spark.sql("DESCRIBE DETAIL ro_cdf").collect()[0]["location"].removeprefix("file:")

    reader.sql(template.format(path=inside)).limit(1).collect()


def test_the_session_it_came_from_still_writes(spark: SparkSession, reader: SparkSession) -> None:
    spark.sql("CREATE TABLE IF NOT EXISTS ro_scratch (a INT) USING delta")
    spark.sql("INSERT INTO ro_scratch VALUES (1)")
    assert reader.table("ro_scratch").count() == 1


def test_variables_in_a_guarded_statement_stay_text(reader: SparkSession) -> None:
    row = reader.sql("SELECT '${env:HOME}' AS e, '${spark.lakehouse.home}' AS h").collect()[0]
    assert (row.e, row.h) == ("${env:HOME}", "${spark.lakehouse.home}")


def test_a_per_query_file_system_option_is_refused(
    spark: SparkSession, reader: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A viewfs mount set in the statement's options puts any directory under a home-like path."""
    mounted = tmp_path_factory.mktemp("mounted")
    (mounted / "secret.txt").write_text("s3cr3t\n")
    statement = (
        "SELECT * FROM text.`viewfs://m/lhmount/secret.txt` "
        f"WITH ('fs.viewfs.mounttable.m.link./lhmount' = 'file://{mounted}')"
    )
    assert spark.sql(statement).collect()[0].value == "s3cr3t"  # the statement reads, unguarded
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Spark error type; text checked
        reader.sql(statement).collect()
    assert "outside the lakehouse home" in (refusal(caught.value) or str(caught.value)[:300])
    # On a path inside the home too: the option could change what the path means.
    inside = Path(spark.conf.get(HOME_CONF)) / "ro-notes.txt"
    inside.write_text("note\n")
    optioned = f"SELECT * FROM text.`{inside}` WITH ('fs.file.impl.disable.cache' = 'true')"
    assert reader.sql(f"SELECT * FROM text.`{inside}`").collect()[0].value == "note"
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Spark error type; text checked
        reader.sql(optioned).collect()
    assert "file-system option" in (refusal(caught.value) or str(caught.value)[:300])


def refused_for(reader: SparkSession, statement: str) -> str:
    """The guard's line for a statement it must refuse."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any Spark error type; text checked
        reader.sql(statement).collect()
    reason = refusal(caught.value)
    assert reason is not None, str(caught.value)[:300]
    return reason


@pytest.mark.parametrize(
    "template",
    [
        "SELECT * FROM text.`{path}`",
        "SELECT * FROM delta.`{path}`",
        "WITH x AS (SELECT * FROM json.`{path}`) SELECT * FROM x",
        "SELECT * FROM range(1) WHERE id IN (SELECT length(value) FROM text.`{path}`)",
        "DESCRIBE delta.`{path}`",
    ],
)
def test_a_path_outside_the_home_is_refused_alike_whether_it_exists_or_not(
    reader: SparkSession, tmp_path_factory: pytest.TempPathFactory, template: str
) -> None:
    """No existence oracle: Spark would answer PATH_NOT_FOUND for a missing path before the
    analysed plan's check ran, and the guard's refusal for an existing one."""
    there = tmp_path_factory.mktemp("oracle") / "there.txt"
    there.write_text("x\n")
    missing = there.with_name("missing.txt")
    reasons = [refused_for(reader, template.format(path=path)) for path in (there, missing)]
    assert reasons == [
        f"a file path outside the lakehouse home ({path}) is refused in a read-only session"
        for path in (there, missing)
    ]


def test_a_symbolic_link_under_the_home_is_judged_where_it_points(
    spark: SparkSession, reader: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("pointed-at")
    (elsewhere / "secret.txt").write_text("s3cr3t\n")
    home = Path(spark.conf.get(HOME_CONF))
    link = home / f"ro-link-{elsewhere.name}"
    link.symlink_to(elsewhere, target_is_directory=True)
    for path in (link / "secret.txt", link / "missing.txt", link / ".." / link.name / "x"):
        assert "outside the lakehouse home" in refused_for(reader, f"SELECT * FROM text.`{path}`")
    real = home / "ro-real.txt"
    real.write_text("fine\n")
    assert reader.sql(f"SELECT * FROM text.`{real}`").collect()[0].value == "fine"
