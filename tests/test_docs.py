"""The documentation stays true to the CLI: every `lakehouse ...` command it shows still parses.

Fast and without Spark: each command is run through typer's CliRunner with `--help` appended,
which parses the command path and stops before anything starts. Also: the README and DESIGN stay
short, and every relative link in the README and docs/ resolves to a file.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ingest.cli.commands import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: Tokens that end one shell command: what follows is another command or a redirection.
_SEPARATORS = {"|", "||", "&&", "&", ";", ">", ">>", "2>", "2>&1", "<"}


def code_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks of a Markdown text."""
    return [match.group(1) for match in _FENCE.finditer(text)]


def shell_lines(block: str) -> list[str]:
    """The block's lines with shell continuations joined and comments dropped."""
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def lakehouse_commands(line: str) -> list[list[str]]:
    """The arguments of every `lakehouse ...` command on one shell line ([] if none)."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []
    commands: list[list[str]] = []
    current: list[str] | None = None
    for token in tokens:
        if token in _SEPARATORS:
            if current is not None:
                commands.append(current)
            current = None
        elif current is None:
            if token == "lakehouse":
                current = []
            elif "=" in token and not token.startswith("-"):
                continue  # an environment assignment before the command
            else:
                current = None
        else:
            current.append(token)
    if current is not None:
        commands.append(current)
    return commands


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every `lakehouse ...` command in a code block of the README or docs/, with its file."""
    found = []
    for doc in DOCS:
        if not doc.exists():
            continue
        for block in code_blocks(doc.read_text()):
            for line in shell_lines(block):
                for args in lakehouse_commands(line):
                    found.append((doc.relative_to(ROOT).as_posix(), args))
    return found


def test_the_parser_reads_shell_lines() -> None:
    line = 'LAKEHOUSE_FAULT="after_commit:exit@1" lakehouse ingest events | tee log # note'
    assert lakehouse_commands(line) == [["ingest", "events"]]
    assert lakehouse_commands("lakehouse serve & beeline -u x") == [["serve"]]
    assert lakehouse_commands("beeline -u jdbc:hive2://127.0.0.1:10000/default") == []
    assert lakehouse_commands('lakehouse sql "SELECT 1" -f json') == [
        ["sql", "SELECT 1", "-f", "json"]
    ]


def test_the_docs_show_commands() -> None:
    commands = {args[0] for _, args in documented_commands() if args}
    assert {"ingest", "status", "sql", "serve", "job-script"} <= commands


@pytest.mark.parametrize(
    ("doc", "args"),
    documented_commands(),
    ids=lambda value: value if isinstance(value, str) else " ".join(value)[:60],
)
def test_every_documented_command_parses(doc: str, args: list[str]) -> None:
    # Optional parts written as `[--repair]` are options the command takes: unwrap them.
    args = [a.strip("[]") if a.startswith("[") or a.endswith("]") else a for a in args]
    # `--help` goes before a `--`, after which every word is an argument of the command.
    cut = args.index("--") if "--" in args else len(args)
    result = CliRunner().invoke(app, [*args[:cut], "--help", *args[cut:]], prog_name="lakehouse")
    assert result.exit_code == 0, f"{doc}: lakehouse {shlex.join(args)}\n{result.output}"


@pytest.mark.parametrize(("name", "limit"), [("README.md", 300), ("docs/DESIGN.md", 300)])
def test_short_documents_stay_short(name: str, limit: int) -> None:
    lines = (ROOT / name).read_text().count("\n")
    assert lines <= limit, f"{name} has {lines} lines; keep it under {limit}"


def test_the_readme_names_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme
    assert "make test" in readme


def relative_links() -> list[tuple[str, str]]:
    links = []
    for doc in DOCS:
        if not doc.exists():
            continue
        for target in _LINK.findall(doc.read_text()):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            links.append((doc.relative_to(ROOT).as_posix(), target))
    return links


@pytest.mark.parametrize(("doc", "target"), relative_links())
def test_every_relative_link_resolves(doc: str, target: str) -> None:
    path = target.split("#", 1)[0]
    assert (ROOT / doc).parent.joinpath(path).exists(), f"{doc} links to missing {target}"
