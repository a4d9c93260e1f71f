"""Rendering rows for people (a table that fits the terminal) and for scripts (JSON or CSV).

A table view fits its terminal, 80 columns when stdout is not one: whole headers, each value on
one line (a long one is cut with `…`), the columns a `View` chooses under short headers; columns
that do not fit are left out and named in the caption. `--wide` shows every column by its full
name, as wide as it takes; JSON and CSV always carry every column and every value whole.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: The width of a table view when stdout is not a terminal (a pipe, a file, a CI log).
DEFAULT_WIDTH = 80
#: A column may be cut down to this many characters (or its header's width) before the next
#: columns are left out instead.
_MIN_CUT = 12
#: The characters between two columns of a table view.
_GAP = 2


class OutputFormat(StrEnum):
    """The formats `status`, `history` and `sql` can print."""

    table = "table"
    json = "json"
    csv = "csv"


@dataclass(frozen=True)
class View:
    """The columns a table view shows first, in order, and the short headers it gives them.

    Columns the view does not name are left out of the table view (`--wide`, JSON and CSV show
    them); a column without a label keeps its name.
    """

    columns: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def label(self, name: str) -> str:
        """The header a table view gives column `name`."""
        return self.labels.get(name, name)


def _plain(value: Any) -> Any:
    """A value as JSON holds it: times in ISO 8601, decimals as text, bytes in base64 (as
    Spark's `to_json` writes BINARY)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    """A value as one line of a table view: line breaks and tabs shown as escapes."""
    if value is None:
        return ""
    text = str(_plain(value))
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def terminal_width() -> int:
    """The terminal's width when stdout is one, else `DEFAULT_WIDTH`."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def fit_columns(
    headers: Sequence[str], natural: Sequence[int], width: int
) -> tuple[list[int], int]:
    """The widths of the columns that fit in `width`, in order, and how many are left out.

    Each column wants its natural width (its header or its longest value) and can do with less
    down to its floor (its header, or `_MIN_CUT` for a long value): as many columns as fit at
    their floors are kept, then the room left makes whole first the columns that need least.
    """
    floors = [max(len(h), min(n, _MIN_CUT)) for h, n in zip(headers, natural, strict=True)]
    kept, used = 0, 0
    for floor in floors:
        step = floor + (_GAP if kept else 0)
        if used + step > width:
            break
        kept, used = kept + 1, used + step
    widths = floors[:kept]
    room = width - used
    for i in sorted(range(kept), key=lambda i: natural[i] - widths[i]):
        grow = min(natural[i] - widths[i], room)
        widths[i] += grow
        room -= grow
    return widths, len(headers) - kept


def render(
    rows: Sequence[Mapping[str, Any]],
    fmt: OutputFormat,
    *,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    view: View | None = None,
    wide: bool = False,
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
                    json.dumps(_plain(v))
                    if isinstance(v := r.get(n), Mapping | list)
                    else _plain(v)
                    if isinstance(v, bytes | bytearray)
                    else v
                    for n in names
                ]
            )
        return buffer.getvalue().rstrip("\n")
    if view is not None and not wide:
        names = [n for n in view.columns if n in names]
    headers = [view.label(n) if view is not None and not wide else n for n in names]
    cells = [[_cell(r.get(n)) for n in names] for r in rows]
    natural = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    if wide:
        widths, hidden = natural, 0
        width = sum(natural) + _GAP * max(len(natural) - 1, 0)
    else:
        width = terminal_width()
        widths, hidden = fit_columns(headers, natural, width)
    return _table_text(headers, cells, widths, title, hidden, width)


def _table_text(
    headers: Sequence[str],
    cells: Sequence[Sequence[str]],
    widths: Sequence[int],
    title: str | None,
    hidden: int,
    width: int,
) -> str:
    # Values are data, never Rich markup or emoji codes: `root:x:0:0` stays text, `[/]` too.
    caption = f"{hidden} more column(s): --wide or -f json shows them" if hidden else None
    table = Table(
        title=Text(title) if title is not None else None,
        caption=Text(caption) if caption else None,
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    for header, column_width in zip(headers, widths, strict=False):
        table.add_column(
            Text(header), no_wrap=True, overflow="ellipsis", width=column_width, min_width=None
        )
    for row in cells:
        table.add_row(*[Text(value) for value in row[: len(widths)]])
    out = Console(width=max(width, 20), record=True, file=io.StringIO(), emoji=False)
    out.print(table)
    return "\n".join(line.rstrip() for line in out.export_text().splitlines()).strip("\n")
