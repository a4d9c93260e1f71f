from __future__ import annotations

import pytest

from tables.ddl import parse_columns
from tables.ddl_types import validate_type
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


#: Types Spark 4.1.4's DDL parser accepts (checked with StructType.fromDDL in a real session).
SPARK_ACCEPTS = [
    "STRING", "string collate utf8_lcase", "VARCHAR(3)", "CHAR(2)", "CHARACTER(2)", "BOOLEAN",
    "TINYINT", "BYTE", "SMALLINT", "SHORT", "INT", "INTEGER", "BIGINT", "LONG", "FLOAT", "REAL",
    "DOUBLE", "DECIMAL", "DECIMAL(10)", "DECIMAL(10,2)", "DEC(5,1)", "NUMERIC(4, 2)", "DATE",
    "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP WITHOUT TIME ZONE", "TIME",
    "TIME(6)", "BINARY", "VOID", "INTERVAL", "INTERVAL YEAR TO MONTH", "INTERVAL DAY TO SECOND",
    "ARRAY<INT>", "ARRAY<ARRAY<STRING>>", "MAP<STRING, INT>", "STRUCT<a: INT, b STRING>",
    "STRUCT<a: INT NOT NULL COMMENT 'x, >'>", "STRUCT<>", "VARIANT", "GEOMETRY(4326)",
    "INT NOT NULL", "INT COMMENT 'c'", "array<struct<a: map<string, array<decimal(10,2)>>>>",
]  # fmt: skip


@pytest.mark.parametrize("text", SPARK_ACCEPTS)
def test_every_type_spark_accepts_passes_the_check_before_spark(text: str) -> None:
    validate_type(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("DUBBLE", "unknown type 'DUBBLE'"),
        ("ARRAY<STRNG>", "unknown type 'STRNG'"),
        ("MAP<STRING, INTT>", "unknown type 'INTT'"),
        ("STRUCT<a: INT, b: TEXT>", "unknown type 'TEXT'"),
        ("BOOL", "unknown type 'BOOL'"),
        ("VARCHAR", "type VARCHAR needs a length"),
        ("INT(3)", "type INT takes no parameters"),
        ("ARRAY(INT)", "type ARRAY takes no parameters"),
        ("MAP<STRING>", "type MAP: expected ','"),
    ],
)
def test_a_type_spark_refuses_is_named_before_spark(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_type(text)
    assert info.value.reason.startswith(reason)
