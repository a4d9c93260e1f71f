from __future__ import annotations

import pytest

from tables.ddl import parse_columns
from tables.errors import ConfigError


@pytest.mark.parametrize(
    ("ddl", "names"),
    [
        ("a STRING, b INT", ["a", "b"]),
        ("a STRING NOT NULL COMMENT 'x, y', b INT", ["a", "b"]),
        ('a STRING COMMENT "it\\"s, here", b INT', ["a", "b"]),
        ("a STRUCT<c: INT, d: ARRAY<MAP<STRING, INT>>>, e DECIMAL(10, 2)", ["a", "e"]),
        ("`weird, name` INT, `a``b` STRING", ["weird, name", "a`b"]),
        ("a: int, b: string", ["a", "b"]),
        ("struct<a:int,b:string>", ["a", "b"]),
        ("  a   STRING  ,\n b INT ", ["a", "b"]),
    ],
)
def test_column_names_are_read_without_spark(ddl: str, names: list[str]) -> None:
    assert [c.name for c in parse_columns(ddl)] == names


def test_base_type_is_the_leading_word() -> None:
    columns = parse_columns("a decimal(10,2) NOT NULL, b TIMESTAMP_NTZ, c ARRAY<INT>")
    assert [c.base_type for c in columns] == ["DECIMAL", "TIMESTAMP_NTZ", "ARRAY"]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("a STRING,,", "column 2 is empty"),
        ("a STRING,", "column 2 is empty"),
        ("int", "has no type"),
        ("a STRUCT<b: INT", "unclosed bracket"),
        ("a INT>", "unbalanced '>'"),
        ("a STRING COMMENT 'open", "unclosed ' quote"),
        ("`a INT", "unclosed"),
    ],
)
def test_a_list_without_shape_is_refused_in_one_line(ddl: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_columns(ddl)
    assert "\n" not in str(info.value)
