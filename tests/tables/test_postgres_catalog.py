"""The Hive metastore catalog on a throwaway PostgreSQL cluster, used by several processes.

Two ingests start at once on an empty metastore database (both create its schema on first use),
then `status` and `sql` run in other processes, and a second working directory with a home of
its own finds a table by name through the same metastore. Every process is a new driver with its
own JVM, as jobs are.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.processes import child_env, command_lines
from tests.support.servers import LOOPBACK, PostgresCluster, free_port, postgres_missing

pytestmark = pytest.mark.slow

PASSWORD_ENV = "LAKEHOUSE_TEST_METASTORE_PASSWORD"
EVENTS = 50
ORDERS = 30
#: A statement in the server's log (`log_statement = ddl`), simple or extended protocol.
LOGGED = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*)")


def config(url: str, *, tables: bool = True) -> str:
    head = f"""
[lakehouse]
home = ".lakehouse"

[lakehouse.catalog]
kind = "hive"
url = "{url}"
user = "lakehouse"
password_env = "{PASSWORD_ENV}"
"""
    return head + (
        """
[tables.events]
schema = "event_id STRING NOT NULL, amount DOUBLE"
keys = ["event_id"]

[tables.orders]
schema = "order_id STRING NOT NULL, total DOUBLE"
keys = ["order_id"]

[pipelines.events]
table = "events"
[pipelines.events.source]
format = "json"
path = "landing_events"

[pipelines.orders]
table = "orders"
[pipelines.orders.source]
format = "json"
path = "landing_orders"
"""
        if tables
        else ""
    )


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster for the module; in CI a missing PostgreSQL fails instead of skipping."""
    missing = postgres_missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} (.ci/run installs it)")
        pytest.skip(missing)
    with PostgresCluster() as cluster:
        yield cluster


def lakehouse(
    cwd: Path, *args: str, password: str | None = "pw-of-the-metastore-3f9c"
) -> subprocess.Popen[str]:
    """Start `lakehouse ARGS` in `cwd`, with the metastore password in the environment or not."""
    env = {k: v for k, v in child_env().items() if k != PASSWORD_ENV}
    if password is not None:
        env[PASSWORD_ENV] = password
    return subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str], timeout: float = 600) -> str:
    """Wait for a command; return its output, failing with its error output if it failed."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"{process.args}: exit {process.returncode}\n{err}"
    return out


def failed(process: subprocess.Popen[str], timeout: float = 600) -> list[str]:
    """Wait for a command that must fail with exit 1; return its error lines."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 1, f"{process.args}: exit {process.returncode}\n{out}\n{err}"
    return err.strip().splitlines()


def land(directory: Path, key: str, value: str, count: int) -> None:
    directory.mkdir()
    lines = (json.dumps({key: f"{key}-{i}", value: float(i)}) for i in range(count))
    (directory / "part-0.json").write_text("\n".join(lines) + "\n")


@dataclass
class Watched:
    """What the command lines of this machine's processes showed while some commands ran."""

    jvms_seen: int = 0
    holding: list[str] = field(default_factory=list)


def watch_command_lines(running: list[subprocess.Popen[str]], secret: str) -> Watched:
    """Read every command line until `running` end; note the driver JVMs and any `secret`."""
    watched = Watched()
    while any(process.poll() is None for process in running):
        for line in command_lines():
            watched.jvms_seen += "org.apache.spark.deploy.SparkSubmit" in line
            if secret in line:
                watched.holding.append(line[:300])
        time.sleep(0.2)
    return watched


def ddl_statements(cluster: PostgresCluster) -> list[str]:
    """The DDL the metastore's clients ran, but DataNucleus' probe of the default schema.

    Every DataNucleus start creates and drops a table `DELETEMEnnn` to learn the schema it
    works in: a table no one else knows, so no lock of another connection is waited for.
    """
    found = (LOGGED.search(line) for line in cluster.log.read_text(errors="replace").splitlines())
    return [m.group(1) for m in found if m and "DELETEME" not in m.group(1)]


def test_processes_share_tables_through_the_postgres_metastore(
    postgres: PostgresCluster, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "lakehouse.toml").write_text(config(postgres.url))
    (second / "lakehouse.toml").write_text(config(postgres.url, tables=False))
    land(first / "landing_events", "event_id", "amount", EVENTS)
    land(first / "landing_orders", "order_id", "total", ORDERS)

    # Both ingests are first users of the empty metastore database: one creates the schema,
    # the other waits for it, and neither hangs.
    ingests = [lakehouse(first, "ingest", name) for name in ("events", "orders")]
    for ingest in ingests:
        finished(ingest)
    schema_ddl = ddl_statements(postgres)
    assert schema_ddl.count('CREATE TABLE "TBLS"') == 1, schema_ddl

    # Three readers at once; `second` has a home of its own, with no table under it, and finds
    # `orders` by name through the metastore.
    started = time.monotonic()
    readers = [
        lakehouse(first, "status", "events", "--format", "json"),
        lakehouse(first, "sql", "--format", "json", "SELECT count(*) AS n FROM events"),
        lakehouse(second, "status", "orders", "--format", "json"),
    ]
    watched = watch_command_lines(readers, postgres.password)
    events, count, orders = (json.loads(finished(reader))[0] for reader in readers)
    # Any local user reads command lines (`ps`): the drivers' JVMs had the password elsewhere.
    assert watched.jvms_seen > 0, "no driver JVM was seen while the readers ran"
    assert watched.holding == [], watched.holding
    print(f"status, sql and status at once on the hive catalog: {time.monotonic() - started:.0f} s")
    assert (events["rows"], events["apps"]) == (EVENTS, {"events": 0})
    assert count["n"] == EVENTS
    assert (orders["rows"], orders["apps"]) == (ORDERS, {"orders": 0})
    assert orders["location"] == f"file:{first / '.lakehouse' / 'warehouse' / 'orders'}"
    assert not list((second / ".lakehouse" / "warehouse").glob("*"))

    names = set(postgres.psql('SELECT "TBL_NAME" FROM "TBLS"').split())
    assert {"events", "events_quarantine", "orders", "orders_quarantine"} <= names
    # After the first use, sessions only read and write rows of the metastore: no DDL that
    # could wait on another connection's locks.
    assert ddl_statements(postgres) == schema_ddl
    assert sum("SEQUENCE_TABLE" in s for s in schema_ddl) == 1, schema_ddl


def test_a_refused_password_is_one_line(postgres: PostgresCluster, tmp_path: Path) -> None:
    (tmp_path / "lakehouse.toml").write_text(config(postgres.url))
    lines = failed(lakehouse(tmp_path, "status", "events", password="wrong"))
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: the Hive metastore at {postgres.url} cannot be")
    assert "password authentication failed" in lines[0]


def test_an_unreachable_metastore_is_one_line(tmp_path: Path) -> None:
    url = f"jdbc:postgresql://{LOOPBACK}:{free_port()}/metastore"
    (tmp_path / "lakehouse.toml").write_text(config(url))
    lines = failed(lakehouse(tmp_path, "status", "events"))
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: the Hive metastore at {url} cannot be")


def test_a_missing_password_variable_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "lakehouse.toml").write_text(config(f"jdbc:postgresql://{LOOPBACK}:1/x"))
    lines = failed(lakehouse(tmp_path, "status", "events", password=None))
    assert lines == [f"error: the metastore password variable {PASSWORD_ENV} is not set"]
