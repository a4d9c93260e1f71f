"""Validation and quoting of names that end up in SQL, in Delta's transaction markers or in paths.

Names come from config files and the command line. None of them reaches SQL as raw text: a name
is checked against a plain ASCII pattern at the entry and then quoted with backticks. Every check
here is a full match (`re.fullmatch`): a pattern ending in `$` would also accept a name followed
by one newline (`'events\\n'`), which then reached Delta as a distinct app id. This module is the
one place where the patterns live; the CLI and the config loader both call it.

A refused value is echoed in the message through `shorten`: escaped (control and invisible
characters show as `\\n`, `\\u200b`) and cut after 60 characters, so a hostile 10,000-character
argument gives a one-line error, not a screenful.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from urllib.parse import unquote

from tables.errors import InvalidIdentifierError, KeyPath

MAX_NAME_LENGTH = 128
SHORTEN_AT = 60

_PART = rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_LENGTH - 1}}}"
_TABLE_NAME = re.compile(rf"{_PART}(?:\.{_PART})?")
_COLUMN_NAME = re.compile(_PART)
#: App ids and pipeline names: letters, digits, `_`, `-`, and dots between non-empty parts.
#: They name checkpoint directories, so a leading dot or `..` is refused.
_APP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
#: Reader, Kafka client and table property keys: `header`, `security.protocol`, `delta.x-y`.
_OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def shorten(value: object, limit: int = SHORTEN_AT) -> str:
    """A refused value as it goes into a one-line message: repr-escaped, cut after `limit`.

    `'events\\n'` stays whole; a 10,000-character name becomes its first 60 characters and
    `… (10000 characters)`.
    """
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def key_path(keys: KeyPath) -> str:
    """A key path as TOML writes it: `tables.events.expectations[0].column`.

    Keys that are not bare TOML keys are quoted and escaped (`tables."t\\n"`) and long ones are
    cut, so a path always fits on one line.
    """
    text = ""
    for key in keys:
        if isinstance(key, int):
            text += f"[{key}]"
            continue
        part = key if _BARE_KEY.fullmatch(key) and len(key) <= SHORTEN_AT else _quoted(key)
        text += f".{part}" if text else part
    return text


def _quoted(key: str) -> str:
    escaped = shorten(key)
    if escaped.startswith("'") and '"' not in key:
        body, tail = escaped[1:].split("'", 1) if "…" in escaped else (escaped[1:-1], "")
        return f'"{body}"{tail}'
    return escaped


def _is(pattern: re.Pattern[str], value: object, limit: int = MAX_NAME_LENGTH) -> bool:
    return isinstance(value, str) and len(value) <= limit and bool(pattern.fullmatch(value))


def is_table_name(name: str) -> bool:
    """Return True for `table` or `db.table` made of plain identifiers."""
    return _is(_TABLE_NAME, name, 2 * MAX_NAME_LENGTH + 1)


def is_column_name(name: str) -> bool:
    """Return True for a plain column identifier."""
    return _is(_COLUMN_NAME, name)


def is_app_id(app_id: str) -> bool:
    """Return True for an app id usable as a Delta txnAppId and a checkpoint directory name."""
    return _is(_APP_ID, app_id)


def is_pipeline_name(name: str) -> bool:
    """Return True for a pipeline name: the same shape as an app id, which it defaults to."""
    return _is(_APP_ID, name)


def is_option_name(name: str) -> bool:
    """Return True for a reader option, Kafka client setting or table property key."""
    return _is(_OPTION_NAME, name)


#: The rule of app ids and pipeline names, which name checkpoint directories.
_DOTTED_RULE = (
    "use 1-128 letters, digits, '_', '-' and '.' between them, starting with a letter or digit"
)


def _validated(name: str, is_valid: Callable[[str], bool], what: str, rule: str) -> str:
    """Return `name` if `is_valid` accepts it, else raise InvalidIdentifierError naming the rule."""
    if not is_valid(name):
        raise InvalidIdentifierError(f"invalid {what} {shorten(name)}: {rule}")
    return name


def validate_table_name(name: str) -> str:
    """Return `name` if it is a valid table name, else raise InvalidIdentifierError."""
    return _validated(
        name,
        is_table_name,
        "table name",
        "use letters, digits and _, not starting with a digit (optionally db.table)",
    )


def validate_column_name(name: str) -> str:
    """Return `name` if it is a valid column name, else raise InvalidIdentifierError."""
    return _validated(
        name,
        is_column_name,
        "column name",
        "use 1-128 letters, digits and _, not starting with a digit",
    )


def validate_app_id(app_id: str) -> str:
    """Return `app_id` if valid, else raise InvalidIdentifierError."""
    return _validated(app_id, is_app_id, "app id", _DOTTED_RULE)


def validate_pipeline_name(name: str) -> str:
    """Return `name` if it is a valid pipeline name, else raise InvalidIdentifierError."""
    return _validated(name, is_pipeline_name, "pipeline name", _DOTTED_RULE)


def validate_option_name(name: str) -> str:
    """Return `name` if it is a valid option or property key, else raise InvalidIdentifierError."""
    return _validated(
        name,
        is_option_name,
        "option name",
        "use letters, digits, '_', '-' and '.' between them, starting with a letter",
    )


def case_collisions(names: Iterable[str]) -> list[tuple[str, ...]]:
    """Groups of names that are equal when case is ignored (Spark resolves names that way)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.lower(), []).append(name)
    return [tuple(group) for group in groups.values() if len(group) > 1]


def quote_identifier(name: str) -> str:
    """Quote a validated dotted name part by part with backticks for use in SQL text."""
    return ".".join(f"`{part.replace('`', '``')}`" for part in name.split("."))


def sql_string_literal(value: str) -> str:
    """Render a Python string as a single-quoted Spark SQL literal."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


#: Characters Hadoop's glob (and so Spark's file readers) takes as a pattern in a path.
_GLOB_CHARACTERS = re.compile(r"([{}\[\]*?\\])")


def file_of_recorded_path(recorded: str) -> str:
    """The file a recorded `_metadata.file_path` names, as a path Spark and Hadoop take.

    Spark's `_metadata.file_path` (which the ledger records) is a URI, URL-encoded: a space is
    `%20` and a `%` is `%25`. Handed back to Spark as it is, it names a file that does not exist.
    Decoded once, it is the path Hadoop's `Path(String)` quotes again itself.
    """

    return unquote(recorded)


def literal_path(path: str) -> str:
    """A path whose glob characters (`{}[]*?\\`) are escaped, so a reader loads that one file.

    Spark's readers expand every path they are given as a Hadoop glob; a file named `a[1].json`
    would otherwise be read as the pattern matching `a1.json`.
    """
    return _GLOB_CHARACTERS.sub(r"\\\1", path)
