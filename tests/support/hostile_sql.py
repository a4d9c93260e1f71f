"""The hostile-SQL corpus: what an analyst may send through a read-only door, each with its fate.

Every door runs it: `lakehouse sql` (tests/ingest/test_sql_readonly.py), the JDBC server
(tests/ingest/test_serve.py) and `lakehouse --remote sql` over Spark Connect
(tests/ingest/test_connect_readonly.py). `{table}` is a committed table of the home the door
serves, `{key}` a column of it, `{outside}` a readable file outside the home. A read runs; a
variable stays text; everything else is refused with the guard's line, which names the reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Statement:
    """One statement and its fate: runs (`reason` None) or is refused naming `reason`.

    `text` is the one value a read returns, where the statement is about what comes back (a
    `${...}` that must stay text); `beeline` is False for a statement beeline would split at its
    `;` before the server sees it.
    """

    sql: str
    reason: str | None = None
    text: str | None = None
    beeline: bool = True

    def on(self, table: str, key: str, outside: str) -> str:
        """The statement for a door's table (and a column of it) and outside file."""
        named = self.sql.replace("{table}", table).replace("{key}", key)
        return named.replace("{outside}", outside)


READS = [
    Statement("SELECT * FROM {table}"),
    Statement("select count(*) AS n from {table}"),
    Statement("WITH c AS (SELECT * FROM {table}) SELECT count(*) AS n FROM c"),
    Statement("SELECT EXISTS (SELECT 1 FROM {table}) AS e"),
    Statement("SELECT (SELECT count(*) FROM {table}) AS m"),
    Statement("SELECT * FROM range(3)"),
    Statement("SELECT 'root:x:0:0' AS a, '[/]' AS b"),
    Statement("SHOW TABLES"),
    Statement("SHOW DATABASES"),
    Statement("SHOW COLUMNS IN {table}"),
    Statement("SHOW TBLPROPERTIES {table}"),
    Statement("SHOW FUNCTIONS LIKE 'abs'"),
    Statement("DESCRIBE {table}"),
    Statement("DESCRIBE TABLE EXTENDED {table}"),
    Statement("DESCRIBE HISTORY {table}"),
    Statement("DESCRIBE DETAIL {table}"),
    Statement("EXPLAIN SELECT * FROM {table}"),
    Statement("EXPLAIN INSERT INTO {table} SELECT * FROM {table}"),
    Statement("USE default"),
    # Variable substitution is off: `${...}` is text, never the environment or a setting.
    Statement("SELECT '${env:HOME}' AS v", text="${env:HOME}"),
    Statement("SELECT '${system:user.name}' AS v", text="${system:user.name}"),
    Statement("SELECT '${spark.lakehouse.home}' AS v", text="${spark.lakehouse.home}"),
    Statement(
        "SELECT '${hiveconf:javax.jdo.option.ConnectionPassword}' AS v",
        text="${hiveconf:javax.jdo.option.ConnectionPassword}",
    ),
]

_WRITE = "another command"
_OUTSIDE = "outside the lakehouse home"

REFUSED = [
    Statement("INSERT INTO {table} SELECT * FROM {table}", _WRITE),
    Statement("INSERT OVERWRITE TABLE {table} SELECT * FROM {table}", _WRITE),
    Statement("DELETE FROM {table}", _WRITE),
    Statement("UPDATE {table} SET {key} = {key}", _WRITE),
    Statement(
        "MERGE INTO {table} t USING {table} s ON t.{key} = s.{key} WHEN MATCHED THEN DELETE", _WRITE
    ),
    Statement("INSERT OVERWRITE DIRECTORY '/tmp/lakehouse-ro-test' USING parquet SELECT 1", _WRITE),
    Statement("INSERT INTO parquet.`/tmp/lakehouse-ro-test` SELECT 1", _OUTSIDE),
    Statement("TRUNCATE TABLE {table}", _WRITE),
    Statement("DROP TABLE {table}", _WRITE),
    Statement("CREATE TABLE ro_new (id INT) USING delta", _WRITE),
    Statement("CREATE TABLE ro_ctas USING delta AS SELECT * FROM {table}", _WRITE),
    Statement("CREATE VIEW ro_v2 AS SELECT 1", _WRITE),
    Statement("ALTER TABLE {table} ADD COLUMNS (x INT)", _WRITE),
    Statement("ALTER TABLE {table} SET TBLPROPERTIES ('a' = 'b')", _WRITE),
    Statement("CREATE FUNCTION ro_f AS 'x.Y' USING JAR '/tmp/x.jar'", _WRITE),
    Statement("CREATE TEMPORARY FUNCTION ro_f AS 'x.Y'", _WRITE),
    Statement("SET spark.databricks.delta.retentionDurationCheck.enabled = false", _WRITE),
    Statement("SET spark.sql.variable.substitute = true", _WRITE),
    Statement("RESET", _WRITE),
    Statement("ADD JAR /tmp/x.jar", _WRITE),
    Statement("ADD FILE /etc/passwd", _WRITE),
    Statement("CACHE TABLE {table}", _WRITE),
    Statement("VACUUM {table}", _WRITE),
    Statement("OPTIMIZE {table}", _WRITE),
    Statement("EXECUTE IMMEDIATE 'DROP TABLE {table}'", _WRITE),
    Statement("BEGIN DROP TABLE {table}; END", _WRITE, beeline=False),
    Statement("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "reflect"),
    Statement("SELECT java_method('java.lang.Math', 'abs', -1)", "java_method"),
    Statement("SELECT try_reflect('java.lang.Math', 'abs', -1)", "reflect"),
    Statement(
        "WITH c AS (SELECT reflect('java.lang.Math', 'abs', -1) AS r) SELECT * FROM c", "reflect"
    ),
    Statement(
        "SELECT * FROM range(1) WHERE '1' IN (SELECT java_method('java.lang.Math', 'abs', 1))",
        "java_method",
    ),
    Statement("SELECT TRANSFORM(1) USING 'sh -c \"touch /tmp/lakehouse-ro-test\"'", "shell"),
    Statement("SELECT * FROM text.`{outside}`", _OUTSIDE),
    Statement("SELECT * FROM text.`{outside}.missing`", _OUTSIDE),
    Statement("SELECT * FROM json.`/etc`", _OUTSIDE),
    Statement("SELECT * FROM text.`http://127.0.0.1:9/x`", _OUTSIDE),
    Statement("SELECT * FROM text.`file://{outside}`", _OUTSIDE),
    Statement("WITH x AS (SELECT * FROM text.`{outside}`) SELECT * FROM x", _OUTSIDE),
    Statement("DESCRIBE delta.`/tmp`", _OUTSIDE),
    Statement(
        "SELECT * FROM text.`viewfs://m/lhmount/x.txt` "
        "WITH ('fs.viewfs.mounttable.m.link./lhmount' = 'file:///etc')",
        _OUTSIDE,
    ),
]
