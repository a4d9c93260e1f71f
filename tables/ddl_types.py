"""The type names of a DDL column, checked against Spark's type grammar before any JVM starts.

`amount DUBBLE` used to be caught only by Spark's parser, after Spark had started (seconds, and a
JVM for nothing). This reads each column's type the way Spark's grammar does: a known type word,
its parameters where it takes them (`VARCHAR(n)`, `DECIMAL(p, s)`), and the element, key, value
and field types of `ARRAY<..>`, `MAP<.., ..>` and `STRUCT<name: type, ...>`, case ignored. What
follows a type (`NOT NULL`, `COMMENT '...'`, `COLLATE ...`) and the values of parameters (a
precision above 38) are still left to Spark, which names them well; a type word Spark does not
know, or a parameter list where none is taken, is refused here in one line.
"""

from __future__ import annotations

import re

from tables.errors import ConfigError
from tables.identifiers import shorten

#: Type words that take no parameters.
_PLAIN = frozenset(
    {
        "STRING", "BOOLEAN", "TINYINT", "BYTE", "SMALLINT", "SHORT", "INT", "INTEGER", "BIGINT",
        "LONG", "FLOAT", "REAL", "DOUBLE", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ",
        "BINARY", "VOID", "VARIANT", "INTERVAL",
    }
)  # fmt: skip
#: Type words that need a parameter list, and those that may have one.
_NEEDS_PARAMETERS = frozenset({"VARCHAR", "CHAR", "CHARACTER", "GEOMETRY", "GEOGRAPHY"})
_MAY_HAVE_PARAMETERS = frozenset({"DECIMAL", "DEC", "NUMERIC", "TIME"})
_NESTED = frozenset({"ARRAY", "MAP", "STRUCT"})
KNOWN_TYPES = _PLAIN | _NEEDS_PARAMETERS | _MAY_HAVE_PARAMETERS | _NESTED
_TOKEN = re.compile(
    r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[A-Za-z_][A-Za-z0-9_]*|\d+|\S)",
    re.ASCII,
)


def validate_type(type_text: str) -> None:
    """Raise ConfigError (`unknown type 'DUBBLE'`) unless the leading type reads as Spark's."""
    tokens = [m.group(1) for m in _TOKEN.finditer(type_text)]
    _read_type(tokens, 0)


def _read_type(tokens: list[str], at: int) -> int:
    """Check the type starting at `tokens[at]`; the index after it."""
    word = tokens[at] if at < len(tokens) else ""
    name = word.upper()
    if name not in KNOWN_TYPES:
        raise ConfigError(f"unknown type {shorten(word)}" if word else "a type is missing")
    at += 1
    has_parameters = at < len(tokens) and tokens[at] == "("
    if has_parameters and name not in _NEEDS_PARAMETERS | _MAY_HAVE_PARAMETERS:
        raise ConfigError(f"type {name} takes no parameters")
    if name in _NEEDS_PARAMETERS and not has_parameters:
        raise ConfigError(f"type {name} needs a length or parameter, e.g. {name}(10)")
    if has_parameters:
        return _skip_past(tokens, at, ")")
    if name not in _NESTED:
        return at
    if at >= len(tokens) or tokens[at] != "<":
        raise ConfigError(f"type {name} needs its parts in <...>, e.g. ARRAY<STRING>")
    at += 1
    if name == "ARRAY":
        at = _read_part(tokens, at)
    elif name == "MAP":
        at = _expect(tokens, _read_part(tokens, at), ",", name)
        at = _read_part(tokens, at)
    else:
        at = _read_fields(tokens, at)
    return _expect(tokens, at, ">", name)


def _read_part(tokens: list[str], at: int) -> int:
    """A nested type and what follows it up to the next `,` or `>` of its level (left to Spark:
    `NOT NULL`, `COMMENT '...'`, `COLLATE ...`, `YEAR TO MONTH`)."""
    at = _read_type(tokens, at)
    depth = 0
    while at < len(tokens) and not (depth == 0 and tokens[at] in (",", ">")):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(tokens[at], 0)
        at += 1
    return at


def _read_fields(tokens: list[str], at: int) -> int:
    """The fields of a STRUCT: `name[:] type [clauses]`, comma-separated, up to its `>`."""
    while at < len(tokens) and tokens[at] != ">":
        at += 1  # the field name
        if at < len(tokens) and tokens[at] == ":":
            at += 1
        at = _read_part(tokens, at)
        if at < len(tokens) and tokens[at] == ",":
            at += 1
    return at


def _expect(tokens: list[str], at: int, wanted: str, name: str) -> int:
    if at >= len(tokens) or tokens[at] != wanted:
        found = shorten(tokens[at]) if at < len(tokens) else "the end"
        raise ConfigError(f"type {name}: expected {wanted!r}, found {found}")
    return at + 1


def _skip_past(tokens: list[str], at: int, closer: str) -> int:
    while at < len(tokens) and tokens[at] != closer:
        at += 1
    return at + 1
