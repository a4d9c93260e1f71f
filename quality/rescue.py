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

Values are the delivered text with only the whitespace between tokens removed: numbers keep their
digits (`17.50`, a 42-digit integer), strings their escapes, nested objects their repeated keys
and order. Only the top level is parsed; a value is found by a linear scan that counts brackets
outside strings, so neither the length of a value nor its depth costs stack (record text is
hostile: a recursive parser dies on a deep one, `java.util.regex` on a long one). This runs in
Python, so it is applied only to the rows a Spark-native check flags.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation

BOM = "\ufeff"
#: Jackson's read limits as Spark 4.1 leaves them (`StreamReadConstraints` defaults): a record
#: past one of them does not parse, whatever its schema.
MAX_NESTING_DEPTH = 1000
MAX_NUMBER_LENGTH = 1000
MAX_STRING_LENGTH = 20_000_000
MAX_NAME_LENGTH = 50_000

_WHITESPACE = re.compile(r"[ \t\n\r]+")
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[\s,\]}]")
_NUMBER = re.compile(r"-?[0-9][0-9.eE+-]*")


def _skip_space(text: str, at: int) -> int:
    found = _WHITESPACE.match(text, at)
    return found.end() if found else at


def string_end(text: str, start: int) -> int:
    """The index after the closing quote of the JSON string opening at `start`.

    A quote closes the string when an even number of backslashes precedes it. ValueError when
    the text ends first.
    """
    at = start + 1
    while True:
        quote = text.find('"', at)
        if quote < 0:
            raise ValueError("unterminated string")
        run = text[at:quote]
        if (len(run) - len(run.rstrip("\\"))) % 2 == 0:
            return quote + 1
        at = quote + 1


def value_end(text: str, start: int) -> int:
    """The index after the JSON value that starts at `start` (a linear scan, no recursion)."""
    first = text[start : start + 1]
    if first == '"':
        return string_end(text, start)
    if first not in ("{", "["):
        found = _SCALAR_END.search(text, start)
        return found.start() if found else len(text)
    depth, at = 0, start
    while True:
        found = _STRUCTURE.search(text, at)
        if found is None:
            raise ValueError("unterminated object or array")
        token = found.group()
        if token == '"':
            at = string_end(text, found.start())
            continue
        depth += 1 if token in "[{" else -1
        at = found.end()
        if depth == 0:
            return at


def compact(value: str) -> str:
    """A JSON value's text without the whitespace between its tokens (strings kept as sent)."""
    if value[:1] not in ("{", "["):
        return value
    parts: list[str] = []
    at = 0
    while True:
        quote = value.find('"', at)
        if quote < 0:
            parts.append(_WHITESPACE.sub("", value[at:]))
            return "".join(parts)
        end = string_end(value, quote)
        parts.append(_WHITESPACE.sub("", value[at:quote]))
        parts.append(value[quote:end])
        at = end


def top_level_members(text: str) -> list[tuple[str, str]] | None:
    """The (name, exact value text) pairs of a JSON object's top level, or None if not one.

    Names are decoded (`"Q\\u0054Y"` is `QTY`); values are the delivered text, compacted.
    Repeated names stay, in order. Anything that does not scan as an object gives None.
    """
    body = text.lstrip(BOM).strip()
    if not body.startswith("{"):
        return None
    members: list[tuple[str, str]] = []
    try:
        at = _skip_space(body, 1)
        if body[at : at + 1] == "}":
            return members if at + 1 == len(body) else None
        while True:
            if body[at : at + 1] != '"':
                return None
            name_end = string_end(body, at)
            name = json.loads(body[at:name_end])
            at = _skip_space(body, name_end)
            if body[at : at + 1] != ":":
                return None
            at = _skip_space(body, at + 1)
            end = value_end(body, at)
            if end == at:
                return None
            members.append((name, compact(body[at:end])))
            at = _skip_space(body, end)
            token = body[at : at + 1]
            if token == "}":
                return members if at + 1 == len(body) else None
            if token != ",":
                return None
            at = _skip_space(body, at + 1)
    except ValueError:
        return None


def parser_limit(text: str) -> str | None:
    """Which of Jackson's read limits the record passes, as a quarantine reason, or None.

    One linear scan: the nesting depth (brackets outside strings), and the longest number,
    string and field name. Used on records Spark's parser refused, to say why precisely.
    """
    depth = deepest = 0
    at = 0
    longest_number = 0
    while True:
        found = _STRUCTURE.search(text, at)
        gap = text[at : found.start() if found else len(text)]
        for number in _NUMBER.findall(gap):
            longest_number = max(longest_number, len(number.lstrip("-")))
        if longest_number > MAX_NUMBER_LENGTH:
            return (
                f"malformed JSON: a number of more than {MAX_NUMBER_LENGTH:,} digits "
                "(the JSON parser's limit)"
            )
        if found is None:
            return None
        token = found.group()
        if token == '"':
            try:
                end = string_end(text, found.start())
            except ValueError:
                return None
            length = end - found.start() - 2
            after = _skip_space(text, end)
            is_name = text[after : after + 1] == ":"
            if is_name and length > MAX_NAME_LENGTH:
                return (
                    f"malformed JSON: a field name of more than {MAX_NAME_LENGTH:,} characters "
                    "(the JSON parser's limit)"
                )
            if length > MAX_STRING_LENGTH:
                return (
                    f"malformed JSON: a string of more than {MAX_STRING_LENGTH:,} characters "
                    "(the JSON parser's limit)"
                )
            at = end
            continue
        depth += 1 if token in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING_DEPTH:
            return (
                f"malformed JSON: nested more than {MAX_NESTING_DEPTH:,} levels deep "
                "(the JSON parser's limit)"
            )
        at = found.end()


NOT_JSON = "malformed JSON: not valid JSON (truncated or broken)"
NOT_AN_OBJECT = "malformed JSON: the record is an array or a bare value, not an object"


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


TRAILING_TEXT = "malformed JSON: trailing text after the JSON object"


def has_trailing_text(text: str) -> bool:
    """True if a JSON object is followed by more than whitespace (Spark's parser stops before).

    Decoded by Python (strict), with room for the 1,000 levels Spark's parser lets through.
    """
    body = text.lstrip(BOM).strip()
    try:
        with _nesting_room():
            _, end = _STRICT.raw_decode(body)
    except (ValueError, RecursionError):
        return False
    return end != len(body)


@contextmanager
def _nesting_room() -> Iterator[None]:
    """Python's decoder takes one interpreter level per nesting level (in C, a few hundred
    bytes of stack each): room for the 1,000 levels Jackson allows, restored after."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, MAX_NESTING_DEPTH + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def parse_failure(text: str) -> str | None:
    """Why Spark's strict parse refused a record, as a quarantine reason; None for an object.

    A parser limit first (`parser_limit`), then strict JSON (no NaN, single quotes, comments,
    raw control characters), then an object. None means the record is a JSON object whose values
    do not fit the columns, which the classification names. The decode is Python's, which
    recurses once per level: the limit check has bounded the depth to 1,000 first.
    """
    limit = parser_limit(text)
    if limit is not None:
        return limit
    body = text.lstrip(BOM).strip()
    try:
        with _nesting_room():
            value, end = _STRICT.raw_decode(body)
    except (ValueError, RecursionError):
        return NOT_JSON
    if end != len(body):
        return NOT_JSON
    return None if isinstance(value, dict) else NOT_AN_OBJECT


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
    members = top_level_members(line)
    if members is None:
        return None
    return rescued_from(members, columns, strings, decimals)


def rescued_from(
    members: Sequence[tuple[str, str]],
    columns: Sequence[str],
    strings: Sequence[str],
    decimals: Mapping[str, int] | None = None,
) -> str | None:
    """`rescued_json` of a record already split into its top-level members."""
    known, text_columns = set(columns), set(strings)
    scales = decimals or {}
    last: dict[str, str] = {}
    earlier: dict[str, list[str]] = {}
    for name, value in members:
        if name in last:
            earlier.setdefault(name, []).append(last[name])
        last[name] = value
    fields = [(k, v) for k, v in last.items() if k not in known]
    converted = [
        (k, v)
        for k, v in last.items()
        if (k in text_columns and v != "null" and not v.startswith('"'))
        or (k in scales and _is_rounded_value(v, scales[k]))
    ]
    return render_fields(fields, converted, list(earlier.items()))


def _is_rounded_value(value: str, scale: int) -> bool:
    if value.startswith('"'):
        decoded = json.loads(value)
        return isinstance(decoded, str) and is_rounded(decoded, scale)
    return value[:1] not in ("{", "[") and is_rounded(value, scale)


def as_json(value: str | None) -> str:
    """A Python string (or None) as JSON text, for `render_fields` (CSV fields are strings)."""
    return json.dumps(value, ensure_ascii=False)


def render_fields(
    fields: Sequence[tuple[str, str]],
    converted: Sequence[tuple[str, str]],
    duplicates: Sequence[tuple[str, list[str]]],
) -> str | None:
    """The `_lh_rescued` JSON text from its three members (each left out when empty), or None.

    Values are JSON texts already (`as_json` turns a Python string into one).
    """

    def members(pairs: Sequence[tuple[str, str]]) -> str:
        return "{" + ",".join(f"{as_json(k)}:{v}" for k, v in pairs) + "}"

    parts = [
        f'"{member}":{text}'
        for member, text in (
            ("fields", members(fields) if fields else ""),
            ("converted", members(converted) if converted else ""),
            (
                "duplicates",
                members([(k, "[" + ",".join(v) + "]") for k, v in duplicates])
                if duplicates
                else "",
            ),
        )
        if text
    ]
    return "{" + ",".join(parts) + "}" if parts else None


def split_rescued_field(rescued: str | None, name: str) -> tuple[str | None, str | None]:
    """The exact value text of field `name` in `_lh_rescued`'s `fields`, and the rescued text
    without it (None when nothing is left); (None, rescued) when the field is not there."""
    members = top_level_members(rescued) if rescued is not None else None
    if members is None:
        return None, rescued
    parts = dict(members)
    fields = top_level_members(parts.get("fields", "{}")) or []
    value = next((v for k, v in fields if k == name), None)
    if value is None:
        return None, rescued
    kept = [(k, v) for k, v in fields if k != name]
    rest = [f'"fields":{{{",".join(f"{as_json(k)}:{v}" for k, v in kept)}}}'] if kept else []
    rest += [f'"{m}":{parts[m]}' for m in ("converted", "duplicates") if m in parts]
    return value, "{" + ",".join(rest) + "}" if rest else None
