"""`lakehouse serve` and `lakehouse job-script` at the command line (no server is started here)."""

from __future__ import annotations

import shlex
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.cli.deploy import is_loopback
from ingest.job import main, script_path
from ingest.serve import ServeOptions
from ingest.submit import DELTA_PACKAGE
from tables.engine.confs import SERVER_READ_ONLY_CONF
from tables.engine.limits import QueryLimits
from tables.errors import ConfigError

runner = CliRunner()


def test_job_script_prints_a_spark_submit_line() -> None:
    result = runner.invoke(
        app, ["job-script", "--master", "spark://10.0.0.5:7077", "ingest", "events"]
    )
    assert result.exit_code == 0, result.output
    words = shlex.split(result.stdout)
    assert words[:5] == [
        "spark-submit",
        "--master",
        "spark://10.0.0.5:7077",
        "--packages",
        DELTA_PACKAGE,
    ]
    assert words[5] == str(script_path())
    assert words[6:] == ["ingest", "events"]
    assert Path(words[5]).name == "job.py"


def test_the_job_entry_returns_the_cli_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["status", "no\nsuch"]) == 1
    assert main(["--help"]) == 0


def test_serve_refuses_a_busy_port_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port} (Address already in use): another server "
        "holds it; pass --port"
    ]


def test_serve_options() -> None:
    options = ServeOptions(port=10005)
    assert options.url == "jdbc:hive2://127.0.0.1:10005/default"
    token = Path("/home/me/.lakehouse/serve/token")
    conf = options.session_conf(token)
    assert conf[SERVER_READ_ONLY_CONF] == "true"
    assert ServeOptions(allow_writes=True).session_conf(token)[SERVER_READ_ONLY_CONF] == "false"
    # Every login checked against the token's file; the token itself is in no setting.
    assert conf["hive.server2.authentication"] == "CUSTOM"
    assert conf["hive.server2.custom.authentication.class"] == "lakehouse.TokenAuthenticator"
    assert conf["spark.lakehouse.serve.authFile"] == str(token)
    # The statement timeout of [lakehouse.queries]: the JDBC server cancels and interrupts.
    assert conf["spark.sql.thriftServer.queryTimeout"] == "300s"
    assert conf["spark.sql.thriftServer.interruptOnCancel"] == "true"
    limited = ServeOptions(limits=QueryLimits(timeout_seconds=30.4)).session_conf(token)
    assert limited["spark.sql.thriftServer.queryTimeout"] == "30s"
    with pytest.raises(ConfigError, match="--port"):
        ServeOptions(port=70000)


def test_serve_with_writes_asks_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["serve", "--allow-writes", "--port", "1"], input="n\n")
    assert result.exit_code == 1
    assert "Let every client" in result.output
    assert "Aborted" in result.output


def test_serve_asks_before_spark_connect_listens_beyond_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # Each server is asked for: JDBC first (yes here), then Spark Connect (no).
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--port", "1"], input="y\nn\n")
    assert result.exit_code == 1
    assert "Serve JDBC on 0.0.0.0:1, beyond this machine?" in result.output
    assert "Spark Connect asks for a token but has no TLS" in result.output
    assert "between a client and 0.0.0.0:15002 can take the token" in result.output
    assert "Aborted" in result.output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("db.example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_job_script_takes_the_command_without_a_separator() -> None:
    result = runner.invoke(app, ["job-script", "ingest", "events", "-c", "lakehouse.toml"])
    assert result.exit_code == 0, result.output
    assert shlex.split(result.stdout)[-4:] == ["ingest", "events", "-c", "lakehouse.toml"]


def test_yes_never_answers_the_exposure_question_and_expose_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    asked = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--yes", "--port", "1"], input="n\n")
    assert asked.exit_code == 1
    assert "Serve JDBC on 0.0.0.0:1, beyond this machine?" in asked.output
    with socket.socket() as held:  # a port in use: `serve` stops there, before Spark starts
        held.bind(("0.0.0.0", 0))
        port = str(held.getsockname()[1])
        exposed = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--expose", "--port", port])
    assert exposed.exit_code == 1
    assert "beyond this machine" not in exposed.output
    assert f"cannot listen on 0.0.0.0:{port}" in exposed.stderr
