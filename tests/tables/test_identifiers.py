from __future__ import annotations

import pytest

from tables.errors import InvalidIdentifierError
from tables.identifiers import (
    case_collisions,
    is_app_id,
    is_column_name,
    is_option_name,
    is_pipeline_name,
    is_table_name,
    key_path,
    quote_identifier,
    shorten,
    sql_string_literal,
    validate_app_id,
    validate_option_name,
    validate_pipeline_name,
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


@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "\t", "\x00", "\u200b", "\ufeff"])
def test_names_must_match_whole(suffix: str) -> None:
    assert not is_table_name("events" + suffix)
    assert not is_column_name("amount" + suffix)
    assert not is_app_id("events-landing" + suffix)
    assert not is_pipeline_name("landing" + suffix)
    assert not is_option_name("header" + suffix)


@pytest.mark.parametrize("name", ["landing", "events-landing", "a.b_c-1", "2024"])
def test_pipeline_names(name: str) -> None:
    assert validate_pipeline_name(name) == name


@pytest.mark.parametrize("name", ["header", "multiLine", "security.protocol", "delta.x-y_z"])
def test_option_names(name: str) -> None:
    assert validate_option_name(name) == name


@pytest.mark.parametrize("name", ["", ".a", "a.", "a..b", "1a", "a b", "a=b", "x" * 129])
def test_bad_option_names(name: str) -> None:
    with pytest.raises(InvalidIdentifierError):
        validate_option_name(name)


@pytest.mark.parametrize("app_id", [".a", "a..b", "a.", "../x"])
def test_app_ids_have_no_empty_dotted_part(app_id: str) -> None:
    assert not is_app_id(app_id)


def test_refused_values_are_shortened_and_escaped() -> None:
    assert shorten("events\n") == "'events\\n'"
    assert shorten("a\u200bb") == "'a\\u200bb'"
    assert shorten("a" * 10_000) == repr("a" * 60) + "… (10000 characters)"
    assert shorten(5) == "5"
    with pytest.raises(InvalidIdentifierError) as info:
        validate_table_name("x" * 10_000)
    assert len(str(info.value)) < 200


def test_key_paths_quote_what_is_not_a_bare_key() -> None:
    assert key_path(("tables", "events", "expectations", 0, "column")) == (
        "tables.events.expectations[0].column"
    )
    assert key_path(("tables", "t\n")) == 'tables."t\\n"'
    assert key_path(("options", "security.protocol")) == 'options."security.protocol"'


def test_case_collisions() -> None:
    assert case_collisions(["t", "T", "u", "events", "EVENTS", "Events"]) == [
        ("t", "T"),
        ("events", "EVENTS", "Events"),
    ]
    assert case_collisions(["a", "b"]) == []
