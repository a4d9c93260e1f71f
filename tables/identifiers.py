"""Validation and quoting of names that end up in SQL or in Delta's transaction markers.

Names come from config files and the command line. None of them reaches SQL as raw text: a name
is checked against a plain-identifier pattern at the entry and then quoted with backticks.
"""

from __future__ import annotations

import re

from tables.errors import InvalidIdentifierError

_PART = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_TABLE_NAME = re.compile(rf"^{_PART}(\.{_PART})?$")
_COLUMN_NAME = re.compile(rf"^{_PART}$")
_APP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def is_table_name(name: str) -> bool:
    """Return True for `table` or `db.table` made of plain identifiers."""
    return bool(_TABLE_NAME.match(name))


def is_column_name(name: str) -> bool:
    """Return True for a plain column identifier."""
    return bool(_COLUMN_NAME.match(name))


def is_app_id(app_id: str) -> bool:
    """Return True for an app id usable as a Delta txnAppId (letters, digits, `._-`)."""
    return bool(_APP_ID.match(app_id))


def validate_table_name(name: str) -> str:
    """Return `name` if it is a valid table name, else raise InvalidIdentifierError."""
    if not isinstance(name, str) or not is_table_name(name):
        raise InvalidIdentifierError(
            f"invalid table name {name!r}: use letters, digits and _ (optionally db.table)"
        )
    return name


def validate_column_name(name: str) -> str:
    """Return `name` if it is a valid column name, else raise InvalidIdentifierError."""
    if not isinstance(name, str) or not is_column_name(name):
        raise InvalidIdentifierError(
            f"invalid column name {name!r}: use letters, digits and _, not starting with a digit"
        )
    return name


def validate_app_id(app_id: str) -> str:
    """Return `app_id` if valid, else raise InvalidIdentifierError."""
    if not isinstance(app_id, str) or not is_app_id(app_id):
        raise InvalidIdentifierError(
            f"invalid app id {app_id!r}: use 1-128 letters, digits, '.', '_' or '-'"
        )
    return app_id


def quote_identifier(name: str) -> str:
    """Quote a validated dotted name part by part with backticks for use in SQL text."""
    return ".".join(f"`{part.replace('`', '``')}`" for part in name.split("."))


def sql_string_literal(value: str) -> str:
    """Render a Python string as a single-quoted Spark SQL literal."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"
