"""`lakehouse --remote sql` is read-only as the local one is: the hostile corpus over Connect.

The statements run as the `sql` command runs them (`tables.engine.readonly.run_statement` on a
client session of the server): the guard in the server's JVM judges each, as in a local session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.engine.readonly import run_statement
from tables.errors import QueryError
from tests.support.connect import Server, assert_own_process
from tests.support.hostile_sql import READS, REFUSED, Statement

pytestmark = [pytest.mark.slow, pytest.mark.connect]


@pytest.fixture(scope="module", autouse=True)
def _own_process() -> None:
    assert_own_process()


@pytest.fixture(scope="module")
def canary(server: Server) -> SparkSession:
    """A client session of the server, over a home holding the `ro_canary` table."""
    session = server.session()
    session.sql("CREATE TABLE IF NOT EXISTS ro_canary (id BIGINT, s STRING) USING delta")
    session.sql("INSERT INTO ro_canary VALUES (1, 'a')")
    return session


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> str:
    secret = tmp_path_factory.mktemp("outside") / "secret.txt"
    secret.write_text("s3cr3t\n")
    return str(secret)


@pytest.mark.parametrize("statement", READS, ids=lambda s: s.sql[:60])
def test_reads_run_and_variables_stay_text(
    canary: SparkSession, outside: str, statement: Statement
) -> None:
    rows = run_statement(
        canary, statement.on("ro_canary", "id", outside), allow_writes=False, confirm=None
    ).collect()

    if statement.text is not None:
        assert [tuple(r) for r in rows] == [(statement.text,)]


@pytest.mark.parametrize("statement", REFUSED, ids=lambda s: s.sql[:60])
def test_everything_else_is_refused_naming_its_reason(
    canary: SparkSession, outside: str, statement: Statement
) -> None:
    with pytest.raises(QueryError) as refused:
        run_statement(
            canary, statement.on("ro_canary", "id", outside), allow_writes=False, confirm=None
        ).collect()

    assert str(statement.reason) in str(refused.value)
    assert "s3cr3t" not in str(refused.value)
    assert canary.table("ro_canary").count() == 1
    assert not Path("/tmp/lakehouse-ro-test").exists()
