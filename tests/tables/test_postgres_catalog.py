"""A production catalog: an external Hive metastore on a throwaway PostgreSQL cluster.

The tables are registered in the metastore database, not derived from the warehouse; several
`lakehouse` processes ingest and query through it at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import child_env
from tests.support.servers import LOOPBACK, PostgresCluster

pytestmark = pytest.mark.slow

PASSWORD_ENV = "LAKEHOUSE_TEST_METASTORE_PASSWORD"


def config(url: str) -> str:
    return f"""
[lakehouse]
home = ".lakehouse"

[lakehouse.catalog]
kind = "hive"
url = "{url}"
user = "lakehouse"
password_env = "{PASSWORD_ENV}"

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


def start(cwd: Path, password: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=cwd,
        env={**child_env(), PASSWORD_ENV: password},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, err[-3000:]
    return out


def land(directory: Path, key: str, value: str, ids: list[str]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{ids[0]}.json").write_text(
        "".join(json.dumps({key: i, value: 1.0}) + "\n" for i in ids)
    )


def test_processes_share_tables_through_a_postgres_metastore(tmp_path: Path) -> None:
    with PostgresCluster() as pg:
        (tmp_path / "lakehouse.toml").write_text(config(pg.url))
        land(tmp_path / "landing_events", "event_id", "amount", [f"e{i}" for i in range(30)])
        land(tmp_path / "landing_orders", "order_id", "total", [f"o{i}" for i in range(20)])
        finish(start(tmp_path, pg.password, "ingest", "events"))

        land(tmp_path / "landing_events", "event_id", "amount", [f"f{i}" for i in range(10)])
        running = [
            start(tmp_path, pg.password, "ingest", "orders"),
            start(tmp_path, pg.password, "ingest", "events"),
            start(
                tmp_path, pg.password, "sql", "--format", "json", "SELECT count(*) AS n FROM events"
            ),
        ]
        outputs = [finish(p) for p in running]
        assert json.loads(outputs[2])[0]["n"] in (30, 40)

        counts = finish(
            start(
                tmp_path,
                pg.password,
                "sql",
                "--format",
                "json",
                "SELECT (SELECT count(DISTINCT event_id) FROM events) AS e, "
                "(SELECT count(*) FROM events) AS e_rows, (SELECT count(*) FROM orders) AS o",
            )
        )
        assert json.loads(counts) == [{"e": 40, "e_rows": 40, "o": 20}]
        status = json.loads(finish(start(tmp_path, pg.password, "status", "events", "-f", "json")))
        assert status[0]["apps"] == {"events": 1}

        listed = subprocess.run(
            [
                "psql",
                "-h",
                LOOPBACK,
                "-p",
                str(pg.port),
                "-U",
                pg.user,
                "-d",
                pg.database,
                "-At",
                "-c",
                'SELECT "TBL_NAME" FROM "TBLS" ORDER BY 1',
            ],
            env={**os.environ, "PGPASSWORD": pg.password},
            capture_output=True,
            text=True,
            check=True,
        )
        assert {"events", "events_quarantine", "orders"} <= set(listed.stdout.split())
        assert not (tmp_path / ".lakehouse" / "metastore_db").exists()


def test_a_missing_password_variable_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "lakehouse.toml").write_text(config(f"jdbc:postgresql://{LOOPBACK}:1/x"))
    result = subprocess.run(
        [sys.executable, "-m", "ingest.cli", "status", "events"],
        cwd=tmp_path,
        env={k: v for k, v in child_env().items() if k != PASSWORD_ENV},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: the metastore password variable {PASSWORD_ENV} is not set"
    ]
