"""Rendering rows for people (a rich table) and for scripts (JSON or CSV on stdout)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


class OutputFormat(StrEnum):
    """The formats `status`, `history` and `sql` can print."""

    table = "table"
    json = "json"
    csv = "csv"


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def render(
    rows: Sequence[Mapping[str, Any]],
    fmt: OutputFormat,
    *,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    console: Console | None = None,
) -> str:
    """Render rows in the chosen format and return the text (the CLI prints it)."""
    names = list(columns) if columns is not None else (list(rows[0]) if rows else [])
    if fmt is OutputFormat.json:
        return json.dumps([{n: _plain(r.get(n)) for n in names} for r in rows], indent=2)
    if fmt is OutputFormat.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        for r in rows:
            writer.writerow(
                [
                    json.dumps(_plain(v)) if isinstance(v := r.get(n), Mapping | list) else v
                    for n in names
                ]
            )
        return buffer.getvalue().rstrip("\n")
    # Values are data, never Rich markup or emoji codes: `root:x:0:0` stays text, `[/]` too.
    table = Table(title=Text(title) if title is not None else None, show_lines=False)
    for name in names:
        table.add_column(Text(name), overflow="fold")
    for r in rows:
        table.add_row(*[Text("" if r.get(n) is None else str(_plain(r.get(n)))) for n in names])
    out = console or Console(width=160, record=True, file=io.StringIO())
    out.print(table)
    return out.export_text().rstrip("\n")
