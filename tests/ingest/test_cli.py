"""The `lakehouse` CLI in-process with typer's CliRunner, on the test session."""

from __future__ import annotations

import csv
import io
import itertools
import json
import time
from pathlib import Path

import pytest
import typer
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.cli.common import EXIT_TRANSIENT, handle_errors, reflowed

runner = CliRunner()

CONFIG = """
[lakehouse]
home = "state"

[tables.cli_events]
schema = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"
keys = ["event_id"]

[pipelines.cli_landing]
table = "cli_events"
[pipelines.cli_landing.source]
format = "json"
path = "landing"
"""


@pytest.fixture(scope="module")
def project(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config and a landing directory with a file, ingested once through the CLI."""
    root = tmp_path_factory.mktemp("cli")
    (root / "lakehouse.toml").write_text(CONFIG)
    (root / "landing").mkdir()
    lines = [
        json.dumps({"event_id": f"e{i}", "user_id": "u", "amount": float(i)}) for i in range(5)
    ]
    (root / "landing" / "a.json").write_text("\n".join(lines + lines[:2]) + "\n")
    result = runner.invoke(app, ["ingest", "--config", str(root / "lakehouse.toml")])
    assert result.exit_code == 0, result.output
    assert "1 batches (1 committed, 0 skipped, 0 empty), 5 rows inserted" in result.stdout
    assert "0 failed check(s)" in result.stdout
    assert "duplicates in batch 2" in result.stderr
    return root


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("ingest", "status", "history", "sql"):
        assert command in result.output


def test_no_help_shows_a_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--help` may print an option's environment default; a token or password must not show."""
    secret = "s3cr3t-of-the-environment"
    for variable in (
        "LAKEHOUSE_REMOTE_TOKEN",
        "SPARK_CONNECT_AUTHENTICATE_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "LAKEHOUSE_METASTORE_PASSWORD",
    ):
        monkeypatch.setenv(variable, secret)
    monkeypatch.setenv("LAKEHOUSE_REMOTE", f"sc://127.0.0.1:15002/;token={secret}")
    commands = [name for c in app.registered_commands if (name := c.name or c.callback.__name__)]

    for command in [[], *([name] for name in commands)]:
        result = runner.invoke(app, [*command, "--help"])
        assert result.exit_code == 0, (command, result.output)
        assert secret not in result.output, command


def test_ingest_help_comes_from_the_docstring() -> None:
    result = runner.invoke(app, ["ingest", "--help"])
    assert result.exit_code == 0
    assert "exactly once" in result.output


def test_a_commands_help_wraps_its_paragraphs_to_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A docstring's line breaks are not kept: at 80 columns they printed lines of a word or two
    (`lakehouse ingest --help`: "what is there" alone on a line)."""
    monkeypatch.setenv("COLUMNS", "80")
    commands = [name for c in app.registered_commands if (name := c.name or c.callback.__name__)]
    for command in commands:
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0, (command, result.output)
        description = [line.rstrip() for line in result.output.split("╭")[0].splitlines()]
        assert all(len(line) <= 80 for line in description), command
        paragraph: list[str] = []
        for line in [*description, ""]:
            if line:
                paragraph.append(line)
                continue
            # A line ends early only where the next word would not have fitted on it.
            for text, after in itertools.pairwise(paragraph):
                assert len(text) + 1 + len(after.split()[0]) > 78, (command, text, after)
            paragraph = []


def test_reflowed_help_joins_a_paragraphs_lines_and_keeps_paragraphs() -> None:
    doc = """Summary line.

        A paragraph over
        two lines.

        Another.
        """
    assert reflowed(doc) == "Summary line.\n\nA paragraph over two lines.\n\nAnother."


def test_ingest_again_is_a_no_op(project: Path) -> None:
    result = runner.invoke(
        app, ["ingest", "cli_landing", "--config", str(project / "lakehouse.toml")]
    )
    assert result.exit_code == 0, result.output
    assert "0 batches" in result.stdout


def test_status_as_json(project: Path) -> None:
    result = runner.invoke(app, ["status", "cli_events", "--format", "json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["rows"], row["apps"], row["quarantined_rows"]) == (5, {"cli_landing": 0}, 0)


def test_history_as_csv(project: Path) -> None:
    result = runner.invoke(app, ["history", "cli_events", "--format", "csv"])
    assert result.exit_code == 0, result.output
    [row] = list(csv.DictReader(io.StringIO(result.stdout)))
    assert (
        row["app_id"],
        row["batch_id"],
        row["rows_inserted"],
        row["rows_duplicate_in_batch"],
    ) == ("cli_landing", "0", "5", "2")
    assert row["source"] == "json: a.json"


def test_quality_shows_the_ingestion_audit(project: Path) -> None:
    result = runner.invoke(app, ["quality", "cli_events", "-f", "json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["check_name"], row["status"], row["checked_keys"]) == (
        "duplicate_record_keys",
        "passed",
        5,
    )


def test_full_check(project: Path) -> None:
    config = str(project / "lakehouse.toml")
    passed = runner.invoke(app, ["check", "cli_events", "--full", "-f", "json", "-c", config])
    without_full = runner.invoke(app, ["check", "cli_events", "-c", config])
    assert passed.exit_code == 0, passed.output
    assert json.loads(passed.stdout)[0]["status"] == "passed"
    assert without_full.exit_code == 1
    assert "check needs --full" in without_full.stderr


def test_sql_by_name_as_table_and_json(project: Path) -> None:
    query = "SELECT count(*) AS n FROM cli_events"
    as_json = runner.invoke(app, ["sql", query, "--format", "json"])
    as_table = runner.invoke(app, ["sql", query])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == [{"n": 5}]
    assert as_table.exit_code == 0
    assert as_table.stdout.split() == ["n", "─", "5"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["status", "no_such_table"], "error: table 'no_such_table' not found in the catalog"),
        (["history", "no_such_table"], "not found in the catalog"),
        (["status", "x`; DROP TABLE y --"], "error: invalid table name"),
        (["history", "cli_events", "--app-id", "a b"], "error: invalid app id"),
        (["sql", "SELEC 1"], "error: SQL failed:"),
        (["sql", "SELECT * FROM no_such_table"], "error: SQL failed:"),
        (["ingest", "--config", "/nonexistent/lakehouse.toml"], "error: config file"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    spark: SparkSession, args: list[str], message: str
) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_bad_config_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "lakehouse.toml"
    path.write_text("[tables.e]\nschema = 'a STRING'\nkeys = ['a']\nkey = 'typo'\n")
    result = runner.invoke(app, ["ingest", "--config", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {path}: tables.e.key: unknown key(s) 'key'; allowed:")


def test_unknown_pipeline(project: Path) -> None:
    result = runner.invoke(app, ["ingest", "nope", "--config", str(project / "lakehouse.toml")])
    assert result.exit_code == 1
    assert "pipeline 'nope' is not declared" in result.stderr
    assert "(declared: cli_landing)" in result.stderr


def test_bad_format_is_a_usage_error() -> None:
    result = runner.invoke(app, ["status", "cli_events", "--format", "xml"])
    assert result.exit_code == 2


def test_history_as_a_table_fits_80_columns_with_whole_headers(project: Path) -> None:
    result = runner.invoke(app, ["history", "cli_events"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].strip() == "ledger of cli_events, app cli_landing"
    headers = lines[1].split()
    assert headers[:6] == ["batch", "version", "read", "inserted", "present", "dups"]
    assert "updated" not in headers  # an insert table has no upsert counts to show
    assert lines[3].split()[:6] == ["0", "1", "7", "5", "0", "2"]
    assert len(lines) == 4 + ("more column" in result.stdout)  # one line per batch

    wide = runner.invoke(app, ["history", "cli_events", "--wide"])
    assert wide.exit_code == 0, wide.output
    assert {"app_id", "rows_updated", "content_hash", "source"} <= set(wide.stdout.split())


def test_sql_says_when_it_cuts_a_result_and_refuses_a_limit_past_the_cap(project: Path) -> None:
    config = str(project / "lakehouse.toml")
    cut = runner.invoke(app, ["sql", "SELECT * FROM cli_events", "--limit", "2", "-f", "json"])
    whole = runner.invoke(app, ["sql", "SELECT * FROM cli_events", "--limit", "5", "-f", "json"])
    past = runner.invoke(app, ["sql", "SELECT 1", "--limit", "1000001", "-c", config])
    assert cut.exit_code == 0, cut.output
    assert len(json.loads(cut.stdout)) == 2
    assert cut.stderr.strip() == "showing the first 2 rows: the result has more (--limit)"
    assert (whole.exit_code, len(json.loads(whole.stdout)), whole.stderr) == (0, 5, "")
    assert past.exit_code == 1
    assert past.stderr.strip() == (
        "error: --limit 1000001 is above the cap of 1000000 rows ([lakehouse.queries] max_rows)"
    )


def test_sql_stops_a_statement_past_its_time_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    limits = '[lakehouse.queries]\ntimeout = "2 seconds"\nmax_rows = 50\n\n'
    (tmp_path / "lakehouse.toml").write_text(CONFIG.replace("[tables.", limits + "[tables.", 1))
    config = str(tmp_path / "lakehouse.toml")
    started = time.monotonic()
    endless = runner.invoke(
        app, ["sql", "SELECT sum(id % 7) AS s FROM range(0, 100000000000000)", "-c", config]
    )
    took = time.monotonic() - started
    assert endless.exit_code == 1, endless.output
    assert endless.stderr.strip() == (
        "error: the statement ran past its time limit of 2 s and was stopped "
        "([lakehouse.queries] timeout sets the limit)"
    )
    assert took < 60, took
    # The session goes on: the next statement runs.
    after = runner.invoke(app, ["sql", "SELECT 1 AS one", "-f", "json", "-c", config])
    assert (after.exit_code, json.loads(after.stdout)) == (0, [{"one": 1}])


@pytest.mark.parametrize(
    "lost",
    [
        ConnectionRefusedError(111, "Connection refused"),
        RuntimeError("Answer from Java side is empty"),
    ],
)
def test_a_lost_driver_jvm_is_one_transient_line(
    lost: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where a command meets the JVM's end outside a batch (a task's VirtualMachineError ends
    the driver), it says so in one line and exits 75 (run again), not with py4j's error."""

    @handle_errors
    def command() -> None:
        try:
            raise lost
        except Exception as exc:
            raise ValueError("a py4j call failed") from exc

    with pytest.raises(typer.Exit) as exit_info:
        command()
    assert exit_info.value.exit_code == EXIT_TRANSIENT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the Spark driver JVM was lost (its log in <home>/logs/")
