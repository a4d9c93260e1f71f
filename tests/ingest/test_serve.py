"""`lakehouse serve`: read-only JDBC over the tables while a stream commits, stopped cleanly.

One server (one JVM) and one continuous ingest serve the whole module; a second server is
started only to be stopped with Ctrl-C. Clients are pyspark's beeline. The server must refuse
writes, DDL and SET with the guard's one line and change nothing; a query by table name must
return whole committed batches, never older than what had committed when it was sent; Ctrl-C
and SIGTERM must each end the server with exit 0 and its last line, and a SIGKILL must leave
nothing listening.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.hostile_sql import READS
from tests.support.hostile_sql import REFUSED as HOSTILE_REFUSED
from tests.support.processes import child_env, command_lines
from tests.support.projects import Pipeline, events, land, write_project
from tests.support.servers import LOOPBACK, LakehouseServer, beeline, beeline_script

pytestmark = pytest.mark.slow

ROWS_PER_FILE = 40
#: The JDBC row cap of the served project: above every table's rows here.
MAX_ROWS = 500
APP_ID = "events-live"
GUARD_LINE = (
    "LAKEHOUSE_READ_ONLY: {} (a write, DDL, SET, ADD JAR or another command) is refused in a "
    "read-only session"
)


@dataclass
class Served:
    """The module's project: a continuous ingest into `events` and a server over its home."""

    root: Path
    landing: Path
    stream: subprocess.Popen[bytes]
    stream_log: Path
    server: LakehouseServer
    files: int = 0

    def land_file(self) -> None:
        """Drop the next file of ROWS_PER_FILE new rows: one micro-batch of the stream."""
        ids = [f"f{self.files}-{i}" for i in range(ROWS_PER_FILE)]
        land(self.landing, f"{self.files:04d}.json", events(ids))
        self.files += 1

    def committed_batches(self) -> int:
        """How many batches the stream has reported committed so far."""
        text = self.stream_log.read_text(errors="replace")
        return len(re.findall(r"^batch \d+: committed", text, re.MULTILINE))

    def log_files(self) -> set[str]:
        """The commit files of the events table's Delta log."""
        log = self.root / ".lakehouse" / "warehouse" / "events" / "_delta_log"
        return {path.name for path in log.glob("*.json")}


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(1)
    raise AssertionError(f"{what} did not happen in {timeout:.0f} s")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve")
    landing = write_project(root, [Pipeline("live", APP_ID)])["live"]
    with open(root / "lakehouse.toml", "a") as config:
        config.write(f"\n[lakehouse.queries]\nmax_rows = {MAX_ROWS}\n")
    stream_log = root / "stream.log"
    with open(stream_log, "wb") as log:
        stream = subprocess.Popen(
            [sys.executable, "-m", "ingest.cli", "ingest", "live", "--trigger", "2 seconds"],
            cwd=root,
            env=child_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # The server starts on an empty home while the stream starts; both JVMs at once.
        with LakehouseServer(root) as server:
            project = Served(root, landing, stream, stream_log, server)
            project.land_file()
            wait_until(lambda: project.committed_batches() == 1, 600, "the stream's batch 0")
            yield project
    finally:
        if stream.poll() is None:
            os.killpg(stream.pid, signal.SIGINT)
            try:
                stream.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(stream.pid, signal.SIGKILL)
                stream.wait()


def counts(server: LakehouseServer) -> dict[str, int]:
    """Rows per app id of `events`, read through the JDBC endpoint."""
    answer = beeline(server, "SELECT _lh_app_id, count(*) FROM events GROUP BY _lh_app_id")
    assert answer.returncode == 0, answer.stderr[-2000:]
    # A line may start with beeline's prompt (`0: jdbc:hive2://...> events-live,40`).
    rows = re.findall(r"([\w-]+),(\d+)$", answer.stdout, re.MULTILINE)
    return {app: int(n) for app, n in rows}


def refusals(output: str) -> list[str]:
    """The plan names in the guard's refusals, one per `Error:` line, in order."""
    pattern = re.compile(re.escape(GUARD_LINE).replace(re.escape("{}"), r"(\w+)"))
    found = []
    for line in output.splitlines():
        if line.startswith("Error:") and "LAKEHOUSE_READ_ONLY" in line:
            match = pattern.search(line)
            assert match is not None, line
            assert line.endswith(match.group(0)), line
            found.append(match.group(1))
    return found


def port_closed(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((LOOPBACK, port)) != 0


def test_writes_ddl_and_set_are_refused_with_the_guards_line_and_change_nothing(
    served: Served,
) -> None:
    before = served.log_files()
    statements = [
        "SELECT 'before', count(*) FROM events",
        "INSERT INTO events SELECT * FROM events",
        "DELETE FROM events",
        "CREATE TABLE intruder (a INT) USING delta",
        "ALTER TABLE events SET TBLPROPERTIES ('intruder' = 'yes')",
        "DROP TABLE events",
        # SET is refused too, so it changes nothing in this client's session: with ANSI mode
        # still on, a malformed cast still fails; the server's read-only switch still holds.
        "SET spark.sql.ansi.enabled=false",
        "SELECT CAST('x' AS INT) AS v",
        "SET spark.lakehouse.server.readOnly=false",
        "INSERT INTO events SELECT * FROM events",
        "SELECT 'after', count(*) FROM events",
    ]
    answer = beeline_script(served.server, statements, served.root)
    output = answer.stdout + answer.stderr
    assert answer.returncode == 0, output[-3000:]  # --force: beeline goes on past errors
    assert refusals(output) == [
        "AppendData",
        "DeleteCommand",
        "CreateTable",
        "SetTableProperties",
        "DropTable",
        "SetCommand",
        "SetCommand",
        "AppendData",
    ]
    assert re.search(r"^Error: .*CAST_INVALID_INPUT", output, re.MULTILINE), output[-3000:]
    # beeline prints `null` without a newline for a statement that failed: find the rows.
    rows = dict(re.findall(r"(before|after),(\d+)$", answer.stdout, re.MULTILINE))
    landed = str(ROWS_PER_FILE * served.files)
    assert rows == {"before": landed, "after": landed}, answer.stdout
    assert served.log_files() == before
    assert not (served.root / ".lakehouse" / "warehouse" / "intruder").exists()

    alone = beeline(served.server, "INSERT INTO events SELECT * FROM events")
    assert alone.returncode == 1
    assert refusals(alone.stderr) == ["AppendData"]
    assert served.log_files() == before

    # Without the server's token, or with another, the login is refused and nothing runs.
    wrong = served.root / "wrong-token"
    wrong.write_text("not-the-servers-token")
    for password in (None, wrong):
        refused = beeline(served.server, "SELECT 'ran', count(*) FROM events", password=password)
        assert refused.returncode != 0, refused.stdout
        assert "ran," not in refused.stdout
        assert "Error validating the login" in refused.stderr, refused.stderr[-2000:]
        assert "not-the-servers-token" not in refused.stdout + refused.stderr

    # Session settings in the connection URL are applied as the session opens, where no SET
    # refusal sees them: every statement of such a session is refused, naming the key.
    expanding = beeline(
        served.server,
        "SELECT '${env:HOME}' AS home",
        url_settings="?spark.sql.variable.substitute=true",
    )
    assert expanding.returncode != 0, expanding.stdout
    assert os.environ["HOME"] not in expanding.stdout
    assert (
        "a session setting from the connection (spark.sql.variable.substitute) is refused in a "
        "read-only session" in expanding.stderr
    ), expanding.stderr[-2000:]


def test_the_hostile_corpus_meets_its_fate_over_jdbc(served: Served, tmp_path: Path) -> None:
    """Each refused statement of the corpus gets the guard's line naming its reason, in order;
    each read runs, `${...}` comes back as text, and a query past the row cap fails in one line
    while one at the cap comes back whole and in order."""
    outside = tmp_path / "secret.txt"
    outside.write_text("s3cr3t\n")
    refused = [s for s in HOSTILE_REFUSED if s.beeline]
    before = served.log_files()

    answer = beeline_script(
        served.server, [s.on("events", "event_id", str(outside)) for s in refused], served.root
    )

    errors = [line for line in answer.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == len(refused), answer.stderr[-3000:]
    for statement, line in zip(refused, errors, strict=True):
        assert "LAKEHOUSE_READ_ONLY" in line, (statement.sql, line)
        assert str(statement.reason) in line, (statement.sql, line)
    assert "s3cr3t" not in answer.stdout
    assert served.log_files() == before
    assert not Path("/tmp/lakehouse-ro-test").exists()

    capped = [
        f"SELECT concat('at-', id) AS v FROM range({MAX_ROWS}) ORDER BY id DESC",
        f"SELECT concat('over-', id) AS v FROM range({MAX_ROWS + 1})",
        f"SELECT concat('sum-', count(*)) AS v FROM range({MAX_ROWS * 10})",
    ]
    reads = beeline_script(
        served.server,
        [s.on("events", "event_id", str(outside)) for s in READS] + capped,
        served.root,
    )

    errors = [line for line in reads.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, reads.stderr[-3000:]
    assert f"the result has more than {MAX_ROWS} rows" in errors[0], errors[0]
    lines = reads.stdout.splitlines()
    # (beeline may print a failed statement's `null` before the next row, on its line)
    shown = [line for line in lines if not line.startswith(("events-live,", "at-"))]
    for statement in READS:
        if statement.text is not None:
            assert any(line.endswith(statement.text) for line in lines), (statement.sql, shown)
    assert not [line for line in lines if os.environ["HOME"] in line.split(",")]
    # A row may follow another statement's last output on its line (beeline's `null`, a prompt).
    at = [found.group(1) for line in lines if (found := re.search(r"(at-\d+)$", line))]
    assert at == [f"at-{n}" for n in reversed(range(MAX_ROWS))], shown
    assert not [line for line in lines if re.search(r"over-\d+$", line)]
    assert any(line.endswith(f"sum-{MAX_ROWS * 10}") for line in lines), shown


def test_no_token_shows_in_command_lines_or_logs(served: Served) -> None:
    """`ps` shows any local user every command line; the logs are the operator's to share."""
    token = served.server.token_file.read_text().strip()
    assert len(token) >= 32

    assert [line[:200] for line in command_lines() if token in line] == []
    logs = [served.server.log, *(served.root / ".lakehouse" / "logs").rglob("*.log")]
    assert len(logs) >= 2, logs
    assert [log for log in logs if token in log.read_text(errors="replace")] == []


def test_a_query_by_name_returns_whole_committed_batches_while_the_stream_commits(
    served: Served,
) -> None:
    seen = 0
    answers = []
    for _ in range(5):
        served.land_file()
        committed = served.committed_batches()
        live = counts(served.server)[APP_ID]
        answers.append(live)
        assert live % ROWS_PER_FILE == 0, f"part of a batch: {live}"
        assert live >= ROWS_PER_FILE * committed, f"stale: {live} rows, {committed} committed"
        assert live <= ROWS_PER_FILE * served.files, f"{live} rows from {served.files} files"
        assert live >= seen, f"went down: {answers}"
        seen = live
        assert served.stream.poll() is None, served.stream_log.read_text()[-3000:]
    wait_until(lambda: served.committed_batches() == served.files, 600, "the last commit")
    assert counts(served.server) == {APP_ID: ROWS_PER_FILE * served.files}
    assert answers[-1] > answers[0] > 0, f"the answers did not grow: {answers}"
    print(f"beeline counts while the stream committed: {answers}")


def test_ctrl_c_stops_the_server_cleanly(served: Served) -> None:
    with LakehouseServer(served.root) as server:
        url = re.escape(server.url)
        serving = re.compile(rf"^serving \d+ table\(s\) at {url} \(read-only\)", re.MULTILINE)
        wait_until(lambda: bool(serving.search(server.output())), 60, "the serving line")
        assert server.stop(signal.SIGINT) == 0
        output = server.output()
    assert output.splitlines()[-1] == f"stopped serving {server.url}", output[-2000:]
    assert "error" not in output.lower(), output[-2000:]
    assert "Traceback" not in output
    assert port_closed(server.port)


def test_a_killed_server_leaves_nothing_listening(served: Served) -> None:
    """SIGKILL (the OOM killer) gives `serve` no chance to stop its Connect server's JVM."""
    with LakehouseServer(served.root) as server:
        connect = re.compile(rf"sc://{LOOPBACK}:{server.connect_port} \(Spark Connect\)")
        wait_until(lambda: bool(connect.search(server.output())), 300, "the Connect endpoint")
        assert server.process is not None
        server.process.kill()
        server.process.wait(60)
        try:
            wait_until(lambda: port_closed(server.connect_port), 120, "the Connect port's closing")
            wait_until(lambda: port_closed(server.port), 120, "the JDBC port's closing")
        finally:
            kill_listeners_of(server.connect_port)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.process.pid, signal.SIGKILL)  # serve's JVM, if left behind


def kill_listeners_of(connect_port: int) -> None:
    """Kill a Connect server an assertion above found orphaned (tests stop their own servers)."""
    marker = f"spark.connect.grpc.binding.port={connect_port}".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if marker in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)


def test_sigterm_stops_the_server_cleanly(served: Served) -> None:
    """Last in the module: it stops the module's server."""
    server = served.server
    assert counts(server)[APP_ID] > 0
    assert server.stop(signal.SIGTERM) == 0
    output = server.output()
    assert output.splitlines()[-1] == f"stopped serving {server.url}", output[-2000:]
    assert "error" not in output.lower(), output[-2000:]
    assert "Traceback" not in output
    assert port_closed(server.port)
