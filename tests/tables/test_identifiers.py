from __future__ import annotations

import pytest

from tables.errors import InvalidIdentifierError
from tables.identifiers import (
    is_app_id,
    is_table_name,
    quote_identifier,
    sql_string_literal,
    validate_app_id,
    validate_table_name,
)

HOSTILE = [
    "x`; DROP TABLE y --",
    "events; DROP TABLE events",
    "a b",
    "1events",
    "",
    "events--",
    "events/*x*/",
    "db.t.x.y",
    "événements",
    "t'",
    'x"',
    "a.b.",
    ".a",
]


@pytest.mark.parametrize("name", ["events", "db.events", "_x", "T_1"])
def test_plain_table_names_are_accepted(name: str) -> None:
    assert is_table_name(name)
    assert validate_table_name(name) == name


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_table_names_are_rejected_with_one_line(name: str) -> None:
    assert not is_table_name(name)
    with pytest.raises(InvalidIdentifierError) as info:
        validate_table_name(name)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("app_id", ["events-landing", "a.b_c-1", "X"])
def test_app_ids(app_id: str) -> None:
    assert validate_app_id(app_id) == app_id


@pytest.mark.parametrize("app_id", ["", "-lead", "a b", "a'b", "x" * 129])
def test_bad_app_ids(app_id: str) -> None:
    assert not is_app_id(app_id)
    with pytest.raises(InvalidIdentifierError):
        validate_app_id(app_id)


def test_quoting() -> None:
    assert quote_identifier("db.t") == "`db`.`t`"
    assert quote_identifier("a`b") == "`a``b`"
    assert sql_string_literal("it's") == "'it\\'s'"
