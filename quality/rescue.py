"""The exact rescued content of one JSON record: what the table's columns cannot hold as delivered.

`_lh_rescued` is a JSON object with up to three members, each present only when it has content:

- `fields`: the top-level fields that are not columns of the table (unknown fields, case
  variants such as `QTY` for column `qty`, blank or odd names), name -> value as delivered;
- `converted`: for a STRING column that received an object, array, number or bool, the value as
  delivered (the column holds Spark's text rendering of it); for a DECIMAL column, a number (or
  numeric string) with more fractional digits than the column's scale keeps, as delivered (the
  column holds it rounded to the scale, as Spark does);
- `duplicates`: for a key that appears more than once in the object, the values that did not
  land (every occurrence but the last, in order; the last one lands, as Spark reads it).

Values keep their JSON type and numbers keep their exact digits (`17.50` stays `17.50`, a
42-digit integer stays whole); nested objects keep repeated keys and key order. Only whitespace
between tokens is not kept. This runs in Python (the `json` module with hooks that keep number
text and key pairs), so it is applied only to the rows that a Spark-native check flags.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

BOM = "\ufeff"


@dataclass(frozen=True)
class _Number:
    """A JSON number kept as the digits it was written with."""

    text: str


@dataclass(frozen=True)
class _Object:
    """A JSON object kept as its key-value pairs, repeated keys and order included."""

    pairs: tuple[tuple[str, Any], ...]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(
    object_pairs_hook=lambda pairs: _Object(tuple(pairs)),
    parse_float=_Number,
    parse_int=_Number,
    parse_constant=_reject_constant,
)


def parse_exact(text: str) -> Any:
    """Parse one JSON text keeping number digits and repeated keys; ValueError if it is not JSON."""
    value, end = _DECODER.raw_decode(text.lstrip(BOM).strip())
    if end != len(text.lstrip(BOM).strip()):
        raise ValueError("trailing text after the JSON value")
    return value


def render(value: Any) -> str:
    """Serialise a value from `parse_exact` back to compact JSON, numbers and pairs as parsed."""
    if isinstance(value, _Object):
        inner = ",".join(f"{json.dumps(k, ensure_ascii=False)}:{render(v)}" for k, v in value.pairs)
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(render(v) for v in value) + "]"
    if isinstance(value, _Number):
        return value.text
    return json.dumps(value, ensure_ascii=False)


def is_rounded(text: str, scale: int) -> bool:
    """True if the number `text` has a non-zero digit beyond `scale` fractional digits.

    Spark rounds such a value into a DECIMAL(p, scale) column (17.505 -> 17.51) without a
    word; trailing zeros (17.500) change nothing. Text that is not a finite number is False:
    Spark does not land it as a decimal at all.
    """
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return False
    if not value.is_finite():
        return False
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # a finite number's exponent
    kept = len(digits)
    while exponent < 0 and kept > 0 and digits[kept - 1] == 0:
        kept, exponent = kept - 1, exponent + 1
    return exponent < -scale


def rescued_json(
    line: str | None,
    columns: Sequence[str],
    strings: Sequence[str],
    decimals: Mapping[str, int] | None = None,
) -> str | None:
    """The `_lh_rescued` text for one JSON record, or None when every field fits its column.

    `columns` are the table's column names the record may set (exact case); `strings` are those
    of type STRING; `decimals` maps DECIMAL columns to their scale. A line that is not a JSON
    object gives None: the reader quarantines it.
    """
    if line is None:
        return None
    try:
        record = parse_exact(line)
    except ValueError:
        return None
    if not isinstance(record, _Object):
        return None
    known, text_columns = set(columns), set(strings)
    last: dict[str, Any] = {}
    earlier: dict[str, list[Any]] = {}
    for key, value in record.pairs:
        if key in last:
            earlier.setdefault(key, []).append(last[key])
        last[key] = value
    fields = [(k, v) for k, v in last.items() if k not in known]
    scales = decimals or {}
    converted = [
        (k, v)
        for k, v in last.items()
        if (k in text_columns and v is not None and not isinstance(v, str))
        or (k in scales and _is_rounded_value(v, scales[k]))
    ]
    return render_fields(fields, converted, list(earlier.items()))


def _is_rounded_value(value: Any, scale: int) -> bool:
    if isinstance(value, _Number):
        return is_rounded(value.text, scale)
    return isinstance(value, str) and is_rounded(value, scale)


def render_fields(
    fields: Sequence[tuple[str, Any]],
    converted: Sequence[tuple[str, Any]],
    duplicates: Sequence[tuple[str, list[Any]]],
) -> str | None:
    """The `_lh_rescued` JSON text from its three members (each left out when empty), or None."""
    parts = [
        f'"{member}":{render(_Object(tuple(pairs)))}'
        for member, pairs in (
            ("fields", fields),
            ("converted", converted),
            ("duplicates", duplicates),
        )
        if pairs
    ]
    return "{" + ",".join(parts) + "}" if parts else None
