"""The column names of a Spark DDL column list, read in pure Python before any JVM starts.

`name TYPE [NOT NULL] [COMMENT '...'], ...` (or the legacy `name: TYPE`, or the whole list in
`struct<...>`), with nested types (`STRUCT<a: INT, b: ARRAY<STRING>>`, `DECIMAL(10, 2)`),
backquoted names (`` `a``b` ``) and quoted comments that may hold commas. Only the top-level
column names and the text of each type are split here; `tables.ddl_types` reads the type names,
and Spark's parser, when Spark starts, the rest. This lets the config loader refuse a key column
that is not in the schema, a duplicate column or a reserved name in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from tables.errors import ConfigError
from tables.identifiers import shorten

_OPENERS = MappingProxyType({"<": ">", "(": ")", "[": "]"})
_STRUCT = re.compile(r"\s*struct\s*<(.*)>\s*", re.IGNORECASE | re.DOTALL)
_TYPE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class DdlColumn:
    """One top-level column: its name (unquoted) and the text after it (type and clauses)."""

    name: str
    type_text: str

    @property
    def base_type(self) -> str:
        """The type's leading word in upper case: `DECIMAL` for `decimal(10,2) NOT NULL`."""
        match = _TYPE_WORD.match(self.type_text)
        return match.group(0).upper() if match else ""


def split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets, quotes and backquotes."""
    pieces: list[str] = []
    closers: list[str] = []
    quote: str | None = None
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\" and quote != "`":
                index += 1
            elif char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif char in _OPENERS:
            closers.append(_OPENERS[char])
        elif closers and char == closers[-1]:
            closers.pop()
        elif char in ">)]":
            raise ConfigError(f"unbalanced {char!r} at character {index + 1}")
        elif char == "," and not closers:
            pieces.append(text[start:index])
            start = index + 1
        index += 1
    if quote is not None:
        raise ConfigError(f"unclosed {quote} quote")
    if closers:
        raise ConfigError(f"unclosed bracket: expected {closers[-1]!r}")
    pieces.append(text[start:])
    return pieces


def parse_columns(ddl: str) -> list[DdlColumn]:
    """The top-level columns of a DDL column list; ConfigError (one line) if it has no shape."""
    struct = _STRUCT.fullmatch(ddl)
    body = struct.group(1) if struct else ddl
    columns = []
    for position, piece in enumerate(split_top_level(body), start=1):
        text = piece.strip()
        if not text:
            raise ConfigError(f"column {position} is empty (a stray comma?)")
        name, rest = _name(text)
        rest = rest.lstrip()
        if rest.startswith(":"):
            rest = rest[1:].lstrip()
        if not rest:
            raise ConfigError(
                f"column {position} ({shorten(name)}) has no type: write 'name TYPE, ...'"
            )
        columns.append(DdlColumn(name, rest.strip()))
    return columns


def _name(text: str) -> tuple[str, str]:
    """The column name at the start of `text` and what follows it."""
    if text.startswith("`"):
        index = 1
        name = []
        while index < len(text):
            if text[index] == "`":
                if text[index + 1 : index + 2] == "`":
                    name.append("`")
                    index += 2
                    continue
                return "".join(name), text[index + 1 :]
            name.append(text[index])
            index += 1
        raise ConfigError(f"unclosed backquote in {shorten(text)}")
    match = re.match(r"[^\s:]+", text)
    assert match is not None  # `text` is stripped and not empty
    return match.group(0), text[match.end() :]
