"""What the CLI prints: data as text, one line per batch, names that are right (finding 9)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app
from ingest.cli.common import err
from ingest.cli.ingest_command import stop_line
from ingest.cli.output import OutputFormat, render
from ingest.run_report import RunReport
from ingest.stopping import exit_code

runner = CliRunner()

CONFIG = """
[lakehouse]
home = "state"

[tables.out_events]
schema = "event_id STRING NOT NULL, note STRING"
keys = ["event_id"]

[pipelines.out_landing]
table = "out_events"
[pipelines.out_landing.source]
format = "json"
path = "landing"
"""


def test_values_are_text_not_markup() -> None:
    rows = [{"line": "root:x:0:0:root:/root", "closing": "[/]", "tag": "[bold]b[/bold]"}]

    text = render(rows, OutputFormat.table, title="[red]t")

    assert "root:x:0:0:root:/root" in text
    assert "❌" not in text
    assert "[/]" in text
    assert "[bold]b[/bold]" in text
    assert "[red]t" in text


def test_binary_values_are_base64_in_every_format() -> None:
    """A quarantined record's `_lh_raw_bytes` (bytes that are not UTF-8) prints as Spark's
    `to_json` writes BINARY, never as a Python repr or a JSON error."""
    rows = [{"raw": bytearray(b"\xff\xfeA"), "nested": [b"\x00"]}]

    assert json.loads(render(rows, OutputFormat.json)) == [{"raw": "//5B", "nested": ["AA=="]}]
    assert "//5B" in render(rows, OutputFormat.csv)
    assert "//5B" in render(rows, OutputFormat.table)
    assert "bytearray" not in render(rows, OutputFormat.table)


def test_stderr_lines_never_wrap(capsys: pytest.CaptureFixture[str]) -> None:
    line = "batch 7: skipped (" + "x" * 300 + ")"

    err.print(line)

    assert capsys.readouterr().err == line + "\n"


def test_stop_line_and_exit_codes() -> None:
    report = RunReport("p", "p", "t", stopped_by=signal.SIGTERM)

    assert exit_code(signal.SIGINT) == 130
    assert exit_code(signal.SIGTERM) == 143
    assert stop_line(report) == (
        "p: stopped by SIGTERM between batches, before its first batch; "
        "the next run goes on from there"
    )


@pytest.fixture(scope="module")
def project(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("out")
    (root / "lakehouse.toml").write_text(CONFIG)
    (root / "landing").mkdir()
    rows = [{"event_id": "e1", "note": "root:x:0:0"}, {"event_id": None, "note": "[/]"}]
    (root / "landing" / "a.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


def test_ingest_summary_names_the_quarantine_table(project: Path) -> None:
    result = runner.invoke(app, ["ingest", "-c", str(project / "lakehouse.toml")])

    assert result.exit_code == 0, result.output
    assert "1 quarantined into out_events_quarantine," in result.stdout


def test_sql_prints_data_that_looks_like_markup(project: Path) -> None:
    runner.invoke(app, ["ingest", "-c", str(project / "lakehouse.toml")])

    result = runner.invoke(app, ["sql", "SELECT note FROM out_events"])
    quarantined = runner.invoke(app, ["sql", "SELECT _lh_raw FROM out_events_quarantine"])

    assert result.exit_code == 0, result.output
    assert "root:x:0:0" in result.stdout
    assert quarantined.exit_code == 0, quarantined.output
    assert "[/]" in quarantined.stdout


def test_quality_of_a_missing_table_is_an_error(spark: SparkSession) -> None:
    result = runner.invoke(app, ["quality", "no_such_table_here"])

    assert result.exit_code == 1
    assert result.stderr.strip() == "error: table 'no_such_table_here' not found in the catalog"


def test_sql_errors_keep_sparks_hint(spark: SparkSession) -> None:
    result = runner.invoke(app, ["sql", "SELECT * FROM no_such_table_here"])

    assert result.exit_code == 1
    assert "TABLE_OR_VIEW_NOT_FOUND" in result.stderr
    assert "If you did not qualify the name with a schema" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
