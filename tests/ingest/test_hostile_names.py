"""Hostile names through every identifier slot of the CLI and of the config: all refused.

Each generated hostile string (tests/support/hostile.py) goes through every command argument
and option that takes a table, pipeline, app id or column, via typer's CliRunner on the real
`lakehouse` app, and through every name slot of `lakehouse.toml`. Every one must be refused with
exit code 1 and one `error:` line, with no traceback, before Spark is asked for a session, and
without a file appearing or changing anywhere under the temporary root (home included).
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing
from pyspark.sql import SparkSession
from typer.testing import CliRunner, Result

from ingest.cli.commands import app
from ingest.config import parse_config
from tables.errors import ConfigError, ConfigFileError
from tables.identifiers import (
    is_app_id,
    is_column_name,
    is_option_name,
    is_pipeline_name,
    is_table_name,
)
from tests.support.hostile import SURROGATES, corpus, generate, is_hostile

runner = CliRunner()
CORPUS = corpus()
TOML_CORPUS = generate()

CONFIG = """
[tables.events]
schema = "event_id STRING NOT NULL, amount DOUBLE, at TIMESTAMP"
keys = ["event_id"]

[pipelines.landing]
table = "events"
[pipelines.landing.source]
format = "json"
path = "landing"
"""

#: Every identifier slot of the CLI: (command, slot) -> argv with the hostile value in it.
#: Positional values follow `--`, as a user passes a name that starts with a dash.
CLI_SLOTS: dict[tuple[str, str], Callable[[str], list[str]]] = {
    ("ingest", "pipeline"): lambda h: ["ingest", "--", h],
    ("status", "table"): lambda h: ["status", "--", h],
    ("history", "table"): lambda h: ["history", "--", h],
    ("history", "app_id"): lambda h: ["history", "--app-id", h, "--", "events"],
    ("quality", "table"): lambda h: ["quality", "--", h],
    ("check", "table"): lambda h: ["check", "--full", "--", h],
    ("replay", "table"): lambda h: ["replay", "--app-id", "landing", "--from-batch", "0", "--", h],
    ("replay", "app_id"): lambda h: ["replay", "--app-id", h, "--from-batch", "0", "--", "events"],
    ("vacuum", "table"): lambda h: ["vacuum", "--dry-run", "--", h],
    ("optimize", "table"): lambda h: ["optimize", "--", h],
    ("optimize", "zorder_by"): lambda h: ["optimize", "--zorder-by", h, "--", "events"],
    ("apps", "table"): lambda h: ["apps", "--", h],
    ("reset-app", "table"): lambda h: [
        *("reset-app", "--app-id", "landing", "--to-batch", "3", "--force", "--yes", "--", h)
    ],
    ("reset-app", "app_id"): lambda h: [
        *("reset-app", "--app-id", h, "--to-batch", "3", "--force", "--yes", "--", "events")
    ],
    ("verify", "table"): lambda h: ["verify", "--", h],
    ("changes", "table"): lambda h: ["changes", "--since", "0", "--", h],
    ("enable-changes", "table"): lambda h: ["enable-changes", "--", h],
    ("verify", "app_id"): lambda h: ["verify", "--app-id", h, "--", "events"],
    ("backfill-rescued", "table"): lambda h: ["backfill-rescued", "--yes", "--", h, "amount"],
    ("backfill-rescued", "column"): lambda h: ["backfill-rescued", "--yes", "--", "events", h],
}
#: Parameter names that carry an identifier; every one of them must have a slot above.
IDENTIFIER_PARAMS = {"table", "pipeline", "app_id", "zorder_by", "column", "columns", "name"}


def _toml(text: str) -> str:
    """A TOML basic string holding exactly `text`."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _backquoted(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


#: Every name slot of the config: slot -> (TOML text with the hostile value, key path prefix).
CONFIG_SLOTS: dict[str, Callable[[str], tuple[str, str]]] = {
    "table name": lambda h: (
        f"[tables.{_toml(h)}]\nschema = 'a STRING'\nkeys = ['a']\n",
        "tables.",
    ),
    "schema column": lambda h: (
        CONFIG.replace(
            '"event_id STRING NOT NULL, amount DOUBLE, at TIMESTAMP"',
            _toml(f"event_id STRING NOT NULL, amount DOUBLE, {_backquoted(h)} TIMESTAMP"),
        ),
        "tables.events.schema",
    ),
    "key column": lambda h: (
        CONFIG.replace('keys = ["event_id"]', f"keys = [{_toml(h)}]"),
        "tables.events.keys",
    ),
    "partition column": lambda h: (
        CONFIG.replace('keys = ["event_id"]', f'keys = ["event_id"]\npartition_by = [{_toml(h)}]'),
        "tables.events.partition_by",
    ),
    "dedup column": lambda h: (
        CONFIG.replace(
            'keys = ["event_id"]',
            f'keys = ["event_id"]\ndedup = "window"\ndedup_window = "1 day"\n'
            f"dedup_column = {_toml(h)}",
        ),
        "tables.events.dedup_column",
    ),
    "expectation column": lambda h: (
        CONFIG.replace(
            "[pipelines.landing]",
            f'[[tables.events.expectations]]\ncheck = "not_null"\ncolumn = {_toml(h)}\n'
            "[pipelines.landing]",
        ),
        "tables.events.expectations[0].column",
    ),
    "table property": lambda h: (
        CONFIG.replace(
            'keys = ["event_id"]', f'keys = ["event_id"]\nproperties = {{{_toml(h)} = "x"}}'
        ),
        "tables.events.properties.",
    ),
    "pipeline name": lambda h: (
        CONFIG.replace("pipelines.landing", f"pipelines.{_toml(h)}"),
        "pipelines.",
    ),
    "pipeline table": lambda h: (
        CONFIG.replace('table = "events"', f"table = {_toml(h)}"),
        "pipelines.landing.table",
    ),
    "app id": lambda h: (
        CONFIG.replace('table = "events"', f'table = "events"\napp_id = {_toml(h)}'),
        "pipelines.landing.app_id",
    ),
    "reader option": lambda h: (
        CONFIG.replace('format = "json"', f'format = "json"\noptions = {{{_toml(h)} = "x"}}'),
        "pipelines.landing.source.options.",
    ),
    "kafka option": lambda h: (
        CONFIG.replace(
            'format = "json"\npath = "landing"',
            f'kind = "kafka"\nbootstrap_servers = "b:9092"\ntopic = "t"\n'
            f'options = {{{_toml(h)} = "x"}}',
        ),
        "pipelines.landing.source.options.",
    ),
}


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and modification time."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            stat = path.lstat()
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp cwd with a valid lakehouse.toml and its landing directory, home inside."""
    cwd = tmp_path / "project"
    (cwd / "landing").mkdir(parents=True)
    (cwd / "lakehouse.toml").write_text(CONFIG)
    home = tmp_path / "home"
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    monkeypatch.delenv("LAKEHOUSE_DEBUG", raising=False)
    monkeypatch.chdir(cwd)
    return tmp_path


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Record every request for a Spark session; the test asserts there was none.

    The spy passes through to the real `get_spark`; it only notes that it was reached. In a
    process where the session-scoped test session is already up, a command that reached it
    would reuse that session, so the spy (not the JVM) is what tells.
    """
    import tables.engine.session

    calls: list[Any] = []
    real = tables.engine.session.get_spark

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    active_before = SparkSession.getActiveSession()
    monkeypatch.setattr(tables.engine.session, "get_spark", spy)
    yield calls
    if active_before is None:
        assert SparkSession.getActiveSession() is None


@pytest.fixture
def fast_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the click command of the typer app once instead of on every invoke (30 ms each)."""
    command = typer.main.get_command(app)
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: command)


def _assert_refused(result: Result, what: str) -> str:
    assert result.exit_code == 1, (what, result.exit_code, result.output[:300])
    assert isinstance(result.exception, SystemExit), (what, result.exception)
    assert "Traceback" not in result.output, what
    lines = result.stderr.splitlines()
    assert len(lines) == 1, (what, result.stderr[:500])
    assert lines[0].startswith("error: "), (what, lines[0][:200])
    assert len(lines[0]) < 600, (what, len(lines[0]))
    assert result.stdout == "", (what, result.stdout[:200])
    return lines[0]


def test_the_corpus_is_large_and_hostile_by_construction() -> None:
    assert len(CORPUS) >= 500
    assert len(set(CORPUS)) == len(CORPUS)
    assert all(is_hostile(h) for h in TOML_CORPUS)
    assert {h for h in CORPUS if len(h) >= 10_000}
    for check in (is_table_name, is_column_name, is_app_id, is_pipeline_name, is_option_name):
        assert not [h for h in CORPUS if check(h)], check.__name__


def test_every_identifier_parameter_of_the_cli_has_a_slot() -> None:
    command = typer.main.get_command(app)
    assert isinstance(command, typer.main.TyperGroup)
    found = {
        (name, param.name)
        for name, sub in command.commands.items()
        for param in sub.params
        if param.name in IDENTIFIER_PARAMS
    }
    assert found == set(CLI_SLOTS)


def test_hostile_names_through_every_cli_slot_are_refused_before_spark(
    project: Path, no_spark: list[Any], fast_cli: None
) -> None:
    before = _tree(project)
    started = time.monotonic()
    refused = 0
    for (command, slot), argv in CLI_SLOTS.items():
        for hostile in CORPUS:
            line = _assert_refused(runner.invoke(app, argv(hostile)), f"{command} {slot}")
            assert "invalid" in line, line
            refused += 1
    assert refused == len(CLI_SLOTS) * len(CORPUS) >= 14 * 500
    assert no_spark == []
    assert _tree(project) == before
    assert time.monotonic() - started < 120


def test_hostile_names_through_every_config_slot_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_spark: list[Any]
) -> None:
    """Parsed as load_config parses a file (tomllib, then parse_config), without the disk."""
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "home"))
    path = tmp_path / "lakehouse.toml"
    refused = 0
    for slot, render in CONFIG_SLOTS.items():
        for hostile in TOML_CORPUS:
            text, key = render(hostile)
            with pytest.raises(ConfigFileError) as info:
                parse_config(tomllib.loads(text), base=tmp_path, path=path)
            message = str(info.value)
            assert message.startswith(f"{path}: {key}"), (slot, message[:300])
            assert "\n" not in message, (slot, message[:300])
            assert len(message) < 800, (slot, len(message))
            refused += 1
    assert refused == len(CONFIG_SLOTS) * len(TOML_CORPUS)
    assert list(tmp_path.iterdir()) == []
    assert no_spark == []


def test_hostile_config_names_through_the_cli_exit_1_in_one_line(
    project: Path, no_spark: list[Any], fast_cli: None
) -> None:
    """Every eighth string of each config slot, written to the file `lakehouse ingest` reads."""
    before = {k: v for k, v in _tree(project).items() if k != "project/lakehouse.toml"}
    config = project / "project" / "lakehouse.toml"
    for slot, render in CONFIG_SLOTS.items():
        for hostile in TOML_CORPUS[::8]:
            config.write_text(render(hostile)[0], encoding="utf-8")
            line = _assert_refused(runner.invoke(app, ["ingest", "-c", str(config)]), slot)
            assert line.startswith(f"error: {config}: "), (slot, line[:200])
    after = {k: v for k, v in _tree(project).items() if k != "project/lakehouse.toml"}
    assert after == before
    assert no_spark == []


@pytest.mark.parametrize("hostile", SURROGATES)
def test_undecodable_argv_names_are_refused(project: Path, hostile: str) -> None:
    result = runner.invoke(app, ["status", "--", hostile])
    _assert_refused(result, "status")


def test_a_refused_10000_character_name_is_echoed_short(project: Path) -> None:
    line = _assert_refused(runner.invoke(app, ["status", "--", "a" * 10_000]), "status")
    assert line.endswith(
        "invalid table name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'… "
        "(10000 characters): use letters, digits and _, not starting with a digit "
        "(optionally db.table)"
    )


def test_config_error_type_is_the_project_one() -> None:
    assert issubclass(ConfigFileError, ConfigError)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            [
                *("reset-app", "events", "--app-id", "events-landing\n"),
                *("--to-batch", "3", "--force", "--yes"),
            ],
            "error: invalid app id 'events-landing\\n': ",
        ),
        (["optimize", "events\n"], "error: invalid table name 'events\\n': "),
        (["history", "events", "--app-id", "events-landing\n"], "error: invalid app id "),
        (["ingest", "landing\n"], "error: invalid pipeline name 'landing\\n': "),
    ],
    ids=["reset-app", "optimize", "history", "ingest"],
)
def test_a_trailing_newline_is_refused_before_spark(
    project: Path, no_spark: list[Any], argv: list[str], line: str
) -> None:
    result = runner.invoke(app, argv)
    assert _assert_refused(result, argv[0]).startswith(line)
    assert no_spark == []


def test_a_table_name_with_a_newline_in_the_config_is_refused_before_any_table_exists(
    project: Path, no_spark: list[Any]
) -> None:
    config = project / "project" / "lakehouse.toml"
    config.write_text(CONFIG + '[tables."t\\n"]\nschema = "a STRING"\nkeys = ["a"]\n')
    result = runner.invoke(app, ["ingest"])
    line = _assert_refused(result, "ingest")
    assert line.startswith('error: lakehouse.toml: tables."t\\n": invalid table name')
    assert no_spark == []
    assert not (project / "home").exists()
