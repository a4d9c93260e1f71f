"""Records of every size and shape a source may send, each with the fate it must meet.

The classes of docs/records.md#limits: long values up to the record limit land exactly, a record
past it is quarantined with its size, depth and width up to the JSON parser's limits land (with
rescue where the schema cannot hold a field), past them they are quarantined with the limit
named, and text Spark's lenient parser would take but JSON does not (single quotes, NaN) is
quarantined. Each record is sent the same to the JSON file path and the Kafka path; the CSV
classes are their own (a CSV record has no nesting). Schema: `SHAPE_SCHEMA`, key `id`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from tables.record_rules import DEFAULT_MAX_RECORD_BYTES

SHAPE_SCHEMA = (
    "id STRING NOT NULL, qty INT, note STRING, tag STRING, price DECIMAL(10, 2), ts TIMESTAMP"
)
MIB = 1024 * 1024
Fate = Literal["landed", "rescued", "quarantined"]


@dataclass(frozen=True)
class Shape:
    """One record: its class, exact bytes, fate, and what the fate must hold.

    `note`: the landed `note` (landed and rescued); `rescued_start`: how `_lh_rescued` starts;
    `reason`: how `_lh_reason` starts (quarantined).
    """

    cls: str
    raw: bytes
    fate: Fate
    note: str | None = None
    rescued_start: str | None = None
    reason: str | None = None


def _record(key: str, **fields: object) -> bytes:
    return json.dumps({"id": key, **fields}).encode()


def _padded(key: str, size: int) -> bytes:
    """A record of exactly `size` bytes: its `note` fills what the rest leaves."""
    empty = len(_record(key, note=""))
    return _record(key, note="y" * (size - empty))


def json_shapes() -> list[Shape]:
    """The JSON classes, about 35 MB in all (two records near the 16 MiB limit)."""
    limit = DEFAULT_MAX_RECORD_BYTES
    deep = "[" * 999 + "]" * 999
    shapes = [
        Shape("value_2000", _record("value_2000", note="y" * 2000), "landed", note="y" * 2000),
        Shape("value_64k", _record("value_64k", note="z" * 65536), "landed", note="z" * 65536),
        Shape("at_the_limit", _padded("at_the_limit", limit), "landed", note="y" * 0),
        Shape(
            "past_the_limit",
            _padded("past_the_limit", limit + 1),
            "quarantined",
            reason=f"record too large: {limit + 1:,} bytes",
        ),
        Shape(
            "escaped_quotes_1m",
            _record("escaped_quotes_1m", note='"' * MIB),
            "landed",
            note='"' * MIB,
        ),
        Shape(
            "backslashes_1m",
            _record("backslashes_1m", note="\\" * MIB),
            "landed",
            note="\\" * MIB,
        ),
        Shape(
            "escaped_key_after_1m",
            _record("escaped_key_after_1m", note="v" * MIB)[:-1] + b', "t\\u0061g": 5}',
            "rescued",
            note="v" * MIB,
            rescued_start='{"converted":{"tag":5}}',
        ),
        Shape(
            "number_in_string_after_1m",
            _record("number_in_string_after_1m", tag="w" * MIB)[:-1] + b', "note": 17.50}',
            "rescued",
            note="17.5",
            rescued_start='{"converted":{"note":17.50}}',
        ),
        Shape(
            "rounded_decimal_after_1m",
            _record("rounded_decimal_after_1m", note="d" * MIB)[:-1] + b', "price": 1.005}',
            "rescued",
            note="d" * MIB,
            rescued_start='{"converted":{"price":1.005}}',
        ),
        Shape(
            "depth_1000",
            b'{"id": "depth_1000", "extra": ' + deep.encode() + b"}",
            "rescued",
            rescued_start='{"fields":{"extra":[[[[',
        ),
        Shape(
            "depth_1001",
            b'{"id": "depth_1001", "extra": [' + deep.encode() + b"]}",
            "quarantined",
            reason="malformed JSON: nested more than 1,000 levels deep",
        ),
        Shape(
            "depth_100000",
            b'{"id": "depth_100000", "note": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "quarantined",
            reason="malformed JSON: nested more than 1,000 levels deep",
        ),
        Shape(
            "keys_10000",
            _record("keys_10000", **{f"k{i}": i for i in range(10_000)}),
            "rescued",
            rescued_start='{"fields":{"k0":0,"k1":1,',
        ),
        Shape(
            "array_100000",
            _record("array_100000", note=list(range(100_000))),
            "rescued",
            note=json.dumps(list(range(100_000)), separators=(",", ":")),
            rescued_start='{"converted":{"note":[0,1,2,',
        ),
        Shape(
            "number_1001_digits",
            b'{"id": "number_1001_digits", "big": 1' + b"0" * 1000 + b"}",
            "quarantined",
            reason="malformed JSON: a number of more than 1,000 digits",
        ),
        Shape(
            "name_50001",
            b'{"id": "name_50001", "' + b"n" * 50_001 + b'": 1}',
            "quarantined",
            reason="malformed JSON: a field name of more than 50,000 characters",
        ),
        Shape(
            "blank_key_1m",
            _record(" " * MIB),
            "quarantined",
            reason="blank record key: id",
        ),
        Shape(
            "single_quotes",
            b"{'id': 'single_quotes', 'qty': 5}",
            "quarantined",
            reason="malformed JSON: not valid JSON",
        ),
        Shape(
            "nan",
            b'{"id": "nan", "qty": NaN}',
            "quarantined",
            reason="malformed JSON: not valid JSON",
        ),
        Shape(
            "epoch_number",
            b'{"id": "epoch_number", "ts": 1790000000}',
            "quarantined",
            reason="wrong type: column ts value '1790000000' is a number, not a TIMESTAMP",
        ),
        Shape(
            "epoch_in_nested_object",
            b'{"id": "epoch_in_nested_object", "note": "n", "m": {"ts": 5}}',
            "rescued",
            note="n",
            rescued_start='{"fields":{"m":{"ts":5}}}',
        ),
    ]
    return [_with_exact_note(s) for s in shapes]


def _with_exact_note(shape: Shape) -> Shape:
    """`at_the_limit` is padded to the byte: its note is whatever the padding came to."""
    if shape.cls != "at_the_limit":
        return shape
    note = json.loads(shape.raw)["note"]
    return Shape(shape.cls, shape.raw, shape.fate, note=note)


def key_of(shape: Shape) -> str:
    """The record key a shape lands under (`blank_key_1m` lands under none)."""
    return shape.cls


def csv_shapes() -> list[tuple[str, bytes, Fate, str | None]]:
    """CSV records after the header `id,note`: (class, record, fate, landed note or reason)."""
    limit = DEFAULT_MAX_RECORD_BYTES
    quotes = '"' * (MIB // 2)
    escaped = '"' + quotes.replace('"', '""') + '"'
    return [
        ("csv_quoted_1m_escaped_quotes", f"csv_a,{escaped}".encode(), "landed", quotes),
        ("csv_long_2000", ("csv_b," + "x" * 2000).encode(), "landed", "x" * 2000),
        (
            "csv_past_the_limit",
            ("csv_c," + "x" * limit).encode(),
            "quarantined",
            f"record too large: {limit + 6:,} bytes",
        ),
    ]
