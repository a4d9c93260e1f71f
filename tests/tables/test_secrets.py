"""Secret settings go to a new JVM in a private properties file, and the Connect token's plumbing.

The file's text is read back by Java's own `Properties.load` (in the test session's JVM), so a
hostile value (separators, escapes, new lines, `\\u`) comes back exactly as written.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.engine.jvm import gateway
from tables.engine.secrets import (
    SUBMIT_ARGS_ENV,
    copy_redacted,
    is_secret,
    properties_text,
    redacted,
    secrets_file,
    secrets_for_launch,
    split_secrets,
    submit_args,
)
from tables.engine.serve_token import (
    REMOTE_TOKEN_ENV,
    TOKEN_ENV,
    authenticated_url,
    client_token,
    connect_failure,
    serve_token,
    token_path,
)
from tables.errors import ConfigError

HOSTILE = {
    "spark.hadoop.javax.jdo.option.ConnectionPassword": "p=a:s#s!w\\o\\u0041rd \n\r\t\fend",
    "spark.hadoop.fs.s3a.secret.key": " leading space, trailing space ",
    "spark.key with = and : in it": "ünïcödé ☃ and \\\\ two backslashes",
    "spark.empty.secret": "",
}


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("spark.hadoop.javax.jdo.option.ConnectionPassword", True),
        ("spark.hadoop.fs.s3a.secret.key", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.s3a.session.token", True),
        ("spark.connect.authenticate.token", True),
        ("spark.hadoop.javax.jdo.option.ConnectionURL", False),
        ("spark.jars", False),
        ("spark.driver.extraJavaOptions", False),
    ],
)
def test_a_setting_is_secret_where_spark_would_redact_it(key: str, secret: bool) -> None:
    assert is_secret(key) is secret


def test_secrets_are_split_from_the_settings_that_may_go_on_a_command_line() -> None:
    public, secret = split_secrets({"spark.jars": "a.jar", **HOSTILE})
    assert public == {
        "spark.jars": "a.jar",
        "spark.key with = and : in it": HOSTILE["spark.key with = and : in it"],
    }
    assert set(secret) == set(HOSTILE) - {"spark.key with = and : in it"}


def test_the_properties_file_reads_back_exactly_in_java(spark: SparkSession) -> None:
    jvm = gateway(spark, "reading a properties file")
    loaded = jvm.java.util.Properties()
    loaded.load(jvm.java.io.StringReader(properties_text(HOSTILE)))
    assert {str(k): str(loaded.getProperty(k)) for k in loaded.stringPropertyNames()} == HOSTILE


def test_the_file_is_this_users_only_and_gone_after_the_launch() -> None:
    with secrets_file({"spark.x.password": "s3cret"}) as path:
        assert path is not None
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert "s3cret" in path.read_text()
    assert not path.exists()
    with secrets_file({}) as nothing:
        assert nothing is None


def test_pyspark_reads_the_file_only_during_the_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUBMIT_ARGS_ENV, "--driver-memory 2g pyspark-shell")
    with secrets_for_launch({"spark.x.password": "s3cret"}):
        args = shlex.split(os.environ[SUBMIT_ARGS_ENV])
        properties = Path(args[1])
        assert args[0] == "--properties-file"
        assert properties.is_file()
        assert args[2:] == ["--load-spark-defaults", "--driver-memory", "2g", "pyspark-shell"]
        assert "s3cret" not in os.environ[SUBMIT_ARGS_ENV]
    assert os.environ[SUBMIT_ARGS_ENV] == "--driver-memory 2g pyspark-shell"
    assert not properties.exists()


def test_submit_args_end_with_the_shell_pyspark_expects() -> None:
    path = Path("/tmp/a b.properties")
    assert shlex.split(submit_args(path, None)) == [
        "--properties-file",
        str(path),
        "--load-spark-defaults",
        "pyspark-shell",
    ]
    assert shlex.split(submit_args(path, "--master local[1]"))[-1] == "pyspark-shell"


def test_the_token_is_made_once_kept_and_refused_when_others_can_read_it(tmp_path: Path) -> None:
    token, made = serve_token(tmp_path)
    assert made
    assert stat.S_IMODE(token_path(tmp_path).stat().st_mode) == 0o600
    assert serve_token(tmp_path) == (token, False)  # kept across starts
    assert client_token(tmp_path, {}) == token
    assert client_token(tmp_path, {TOKEN_ENV: "spark"}) == "spark"
    assert client_token(tmp_path, {TOKEN_ENV: "spark", REMOTE_TOKEN_ENV: "ours"}) == "ours"
    token_path(tmp_path).chmod(0o644)
    with pytest.raises(ConfigError, match=r"can be read by other users \(mode 644\)"):
        serve_token(tmp_path)
    token_path(tmp_path).unlink()  # deleting it makes a new one
    assert serve_token(tmp_path)[0] != token
    assert client_token(tmp_path / "elsewhere", {}) is None


@pytest.mark.parametrize(
    ("url", "token", "expected"),
    [
        ("sc://127.0.0.1:15002", "T", "sc://localhost:15002/;token=T"),
        ("sc://localhost:15002", "T", "sc://localhost:15002/;token=T"),
        ("sc://db.example:15002/;user_id=a", "T", "sc://db.example:15002/;user_id=a;token=T"),
        ("sc://h:1/;token=mine", "T", "sc://h:1/;token=mine"),
        ("sc://h:1", None, "sc://h:1"),
    ],
)
def test_the_client_url_carries_the_token(url: str, token: str | None, expected: str) -> None:
    assert authenticated_url(url, token) == expected


class _RefusedError(Exception):
    """What PySpark raises when the Connect server refuses a call (its gRPC status)."""

    def getGrpcStatusCode(self) -> object:  # noqa: N802 - PySpark's name
        return type("Status", (), {"name": "UNAUTHENTICATED"})()


def test_a_refused_client_is_told_which_token_it_sent(tmp_path: Path) -> None:
    url = "sc://127.0.0.1:1"
    said = [
        connect_failure(url, tmp_path, token, _RefusedError(), environ)
        for token, environ in [
            (None, {}),
            ("t", {}),
            ("t", {TOKEN_ENV: "t"}),
            ("t", {TOKEN_ENV: "s", REMOTE_TOKEN_ENV: "t"}),
        ]
    ]
    assert [line.split("it sent ")[1].split(", not")[0] for line in said] == [
        "no token",
        f"the token in {token_path(tmp_path)}",
        f"the token from {TOKEN_ENV}",
        f"the token from {REMOTE_TOKEN_ENV}",
    ]
    unreachable = connect_failure(url, tmp_path, None, OSError("connection refused"), {})
    assert unreachable.startswith(f"cannot reach the Spark Connect server at {url} (")


def test_a_childs_output_reaches_its_log_with_each_secret_redacted(tmp_path: Path) -> None:
    """A Connect server's Python worker prints its URL with the token; the log must not keep it."""
    token = "tok-3f9c-not-for-logs"
    child = subprocess.Popen(
        [sys.executable, "-c", f"print('url sc://h:1/;token={token} and more'); print('plain')"],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    log = tmp_path / "server.log"

    copy_redacted(child.stdout, log, [token, ""]).join(30)

    assert child.wait(30) == 0
    assert log.read_text().splitlines() == ["url sc://h:1/;token=<redacted> and more", "plain"]
    assert redacted(b"a-tok-b", [b"tok", b""]) == b"a-<redacted>-b"
