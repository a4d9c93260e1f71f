"""A generated corpus of JSON lines and CSV records, each with its class and its expected fate.

Every record gets exactly one fate: `landed` (its columns hold what was sent), `rescued` (landed,
with the exact `_lh_rescued` given), `quarantined` (with a reason prefix and its exact raw text
or bytes) or `copy` (an exact copy of a landed record, counted). Blank lines are `blank`: no
record at all. Event ids are unique per record except for copies and conflicting duplicates, so
each fate can be checked by id or by raw text.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "event_id STRING NOT NULL, kind STRING NOT NULL, qty INT, amount DOUBLE, name STRING"
COLUMNS = ("event_id", "kind", "qty", "amount", "name")


@dataclass(frozen=True)
class Record:
    """One generated record: its bytes, class, fate and what the table or quarantine must hold."""

    raw: bytes
    kind: str
    fate: str
    event_id: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    rescued: str | None = None
    reason: str = ""


def _row(i: int, **over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "event_id": f"j{i}",
        "kind": "click",
        "qty": i % 97,
        "amount": float(i % 13) + 0.5,
        "name": f"n{i}",
    }
    row.update(over)
    return row


def _line(row: dict[str, Any]) -> bytes:
    return json.dumps(row, ensure_ascii=False).encode()


def _landed(
    i: int, cls: str, raw: bytes, row: dict[str, Any], rescued: str | None = None
) -> Record:
    values = {c: row.get(c) for c in COLUMNS}
    return Record(
        raw, cls, "rescued" if rescued else "landed", str(row["event_id"]), values, rescued
    )


def _bad(cls: str, raw: bytes, reason: str) -> Record:
    return Record(raw, cls, "quarantined", reason=reason)


def _json_class(cls: str, i: int) -> list[Record]:
    """The records of one instance of class `cls` (most classes give one line)."""
    row = _row(i)
    eid = row["event_id"]
    if cls == "plain":
        return [_landed(i, cls, _line(row), row)]
    if cls == "unknown_field":
        raw = _line(row)[:-1] + b', "extra": {"a": 1, "b": [1, 2.50]}}'
        return [_landed(i, cls, raw, row, '{"fields":{"extra":{"a":1,"b":[1,2.50]}}}')]
    if cls == "case_variant":
        del row["qty"]
        raw = _line({**row, "QTY": 17})
        return [_landed(i, cls, raw, {**row, "qty": None}, '{"fields":{"QTY":17}}')]
    if cls == "duplicate_key":
        raw = (
            f'{{"event_id": "{eid}", "kind": "view", "kind": "click", '
            f'"qty": 1, "qty": {row["qty"]}}}'
        )
        landed = {"event_id": eid, "kind": "click", "qty": row["qty"]}
        rescued = '{"duplicates":{"kind":["view"],"qty":[1]}}'
        return [_landed(i, cls, raw.encode(), landed, rescued)]
    if cls == "object_in_string":
        raw = _line({**row, "name": {"first": "a", "n": 1}})
        landed = {**row, "name": '{"first":"a","n":1}'}
        return [_landed(i, cls, raw, landed, '{"converted":{"name":{"first":"a","n":1}}}')]
    if cls == "number_in_string":
        raw = f'{{"event_id": "{eid}", "kind": "click", "name": 12.50}}'.encode()
        landed = {"event_id": eid, "kind": "click", "name": "12.5"}
        return [_landed(i, cls, raw, landed, '{"converted":{"name":12.50}}')]
    if cls == "bool_in_string":
        raw = _line({**row, "name": True})
        return [_landed(i, cls, raw, {**row, "name": "true"}, '{"converted":{"name":true}}')]
    if cls == "nested_unknown_with_repeat":
        raw = _line(row)[:-1] + b', "meta": {"k": 1, "k": 2}}'
        return [_landed(i, cls, raw, row, '{"fields":{"meta":{"k":1,"k":2}}}')]
    if cls == "huge_integer_unknown":
        raw = _line(row)[:-1] + b', "big": 123456789012345678901234567890123456789012}'
        rescued = '{"fields":{"big":123456789012345678901234567890123456789012}}'
        return [_landed(i, cls, raw, row, rescued)]
    if cls == "unicode_escapes":
        raw = f'{{"event_id": "{eid}", "kind": "click", "name": "caf\\u00e9 \\ud83d\\ude00"}}'
        return [
            _landed(i, cls, raw.encode(), {"event_id": eid, "kind": "click", "name": "café 😀"})
        ]
    if cls == "bom":
        return [_landed(i, cls, b"\xef\xbb\xbf" + _line(row), row)]
    if cls == "crlf":
        return [_landed(i, cls, _line(row) + b"\r", row)]
    if cls == "blank_unicode_key":
        blank = ["\t", "\n", "\u00a0", "\u200b", "\u3000", " \ufeff "][i % 6]
        raw = _line({**row, "event_id": blank})
        return [_bad(cls, raw, "blank record key: event_id is empty")]
    if cls == "trailing_text":
        return [_bad(cls, _line(row) + b" trailing", "malformed JSON: trailing text")]
    if cls == "two_objects":
        return [_bad(cls, _line(row) + b'{"x": 1}', "malformed JSON: trailing text")]
    if cls == "invalid_utf8":
        return [_bad(cls, _line(row)[:-1] + b', "bad": "\xff\xfe"}', "invalid UTF-8")]
    if cls == "truncated":
        return [_bad(cls, _line(row)[:-7], "malformed JSON: not valid JSON")]
    if cls == "array":
        return [_bad(cls, f"[1, 2, {i}]".encode(), "malformed JSON: the record is an array")]
    if cls == "bare_value":
        return [_bad(cls, f'"bare {i}"'.encode(), "malformed JSON: the record is an array")]
    if cls == "nan":
        raw = _line(row)[:-1] + b', "amount": NaN}'
        return [_bad(cls, raw.replace(b'"amount": ', b'"amt": ', 1), "malformed JSON: not valid")]
    if cls == "huge_double":
        raw = _line(row).replace(f'"amount": {row["amount"]}'.encode(), b'"amount": 1e400')
        return [_bad(cls, raw, "out of range: column amount is not a finite number")]
    if cls == "wrong_type":
        raw = _line({**row, "qty": "many"})
        return [_bad(cls, raw, "wrong type: column qty value 'many' is not a INT")]
    if cls == "null_not_null":
        return [_bad(cls, _line({**row, "kind": None}), "missing required field: kind is null")]
    if cls == "missing_key":
        del row["event_id"]
        return [_bad(cls, _line(row), "missing record key: event_id is null")]
    if cls == "exact_copy":
        line = _line(row)
        return [_landed(i, cls, line, row), Record(line, cls, "copy", eid)]
    if cls == "conflicting_duplicate":
        kept = _landed(i, cls, _line(row), row)
        other = _line({**row, "amount": 1000.0 + i})
        return [kept, _bad(cls, other, f"conflicting duplicate: record key event_id={eid}")]
    if cls == "blank_line":
        return [Record(b"   ", cls, "blank")]
    raise ValueError(cls)


JSON_CLASSES = (
    "plain",
    "unknown_field",
    "case_variant",
    "duplicate_key",
    "object_in_string",
    "number_in_string",
    "bool_in_string",
    "nested_unknown_with_repeat",
    "huge_integer_unknown",
    "unicode_escapes",
    "bom",
    "crlf",
    "blank_unicode_key",
    "trailing_text",
    "two_objects",
    "invalid_utf8",
    "truncated",
    "array",
    "bare_value",
    "nan",
    "huge_double",
    "wrong_type",
    "null_not_null",
    "missing_key",
    "exact_copy",
    "conflicting_duplicate",
    "blank_line",
)


def json_corpus(lines: int = 10_000, seed: int = 16) -> list[Record]:
    """At least `lines` records over every JSON class (each at least once), shuffled by `seed`."""
    rng = random.Random(seed)
    records: list[Record] = []
    i = 0
    while len(records) < lines:
        cls = JSON_CLASSES[i % len(JSON_CLASSES)] if i < 4 * len(JSON_CLASSES) else None
        records.extend(_json_class(cls or rng.choice(JSON_CLASSES), i))
        i += 1
    rng.shuffle(records)
    return records


def write_json(records: list[Record], landing: Path, files: int = 4) -> list[Path]:
    """Write the records as JSON lines into `files` files (the last one gzip as `.json.gz`)."""
    landing.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(files):
        chunk = records[n::files]
        data = b"".join(r.raw + b"\n" for r in chunk)
        if n == files - 1:
            path = landing / f"part-{n}.json.gz"
            path.write_bytes(gzip.compress(data))
        else:
            path = landing / f"part-{n}.json"
            path.write_bytes(data)
        paths.append(path)
    return paths


UNDECODABLE = "undecodable file: gzip-compressed data in a file read as plain text"


def write_gzip_named_json(landing: Path, rows: int = 50) -> Path:
    """A gzip file named `.json`: Spark reads it as text, so it must be one file-level row."""
    data = b"".join(_line(_row(900_000 + i)) + b"\n" for i in range(rows))
    path = landing / "disguised.json"
    path.write_bytes(gzip.compress(data))
    return path


@dataclass(frozen=True)
class CsvFile:
    """One CSV file of the corpus: its name, bytes, and its records (header excluded)."""

    name: str
    data: bytes
    records: list[Record]


def _csv(values: list[str]) -> str:
    return ",".join(values)


def csv_corpus(rows_per_file: int = 30) -> list[CsvFile]:
    """CSV files over at least 10 classes of record and header, with their expected fates."""
    files: list[CsvFile] = []

    def plain(i: int) -> tuple[dict[str, Any], list[str]]:
        row = {"event_id": f"c{i}", "kind": "click", "qty": i % 50, "amount": i + 0.25}
        row["name"] = f"n{i}"
        return row, [row["event_id"], "click", str(row["qty"]), str(row["amount"]), row["name"]]

    # 1. header in schema order: plain, quoted separators, quoted newlines, quoted quotes, empty
    #    field, wrong counts, wrong types, blank keys, exact copies.
    recs: list[Record] = []
    lines = ["event_id,kind,qty,amount,name"]
    for k in range(rows_per_file):
        i = 1000 + k
        row, cells = plain(i)
        variant = k % 10
        if variant == 0:
            text, rec = _csv(cells), _landed(i, "csv_plain", b"", row)
        elif variant == 1:
            row["name"] = f"a,b {i}"
            text = _csv([*cells[:4], f'"a,b {i}"'])
            rec = _landed(i, "csv_quoted_separator", b"", row)
        elif variant == 2:
            row["name"] = f"line one\nline two {i}"
            text = _csv([*cells[:4], f'"line one\nline two {i}"'])
            rec = _landed(i, "csv_quoted_newline", b"", row)
        elif variant == 3:
            row["name"] = f'say "hi" {i}'
            text = _csv([*cells[:4], f'"say ""hi"" {i}"'])
            rec = _landed(i, "csv_quoted_quote", b"", row)
        elif variant == 4:
            row["name"] = None
            text = _csv([*cells[:4], ""])
            rec = _landed(i, "csv_empty_field", b"", row)
        elif variant == 5:
            text = _csv([*cells, "surplus"])
            rec = _bad("csv_too_many_fields", b"", "malformed CSV: 6 fields, the header has 5")
        elif variant == 6:
            text = _csv(cells[:3])
            rec = _bad("csv_too_few_fields", b"", "malformed CSV: 3 fields, the header has 5")
        elif variant == 7:
            text = _csv([cells[0], "click", "lots", *cells[3:]])
            rec = _bad("csv_wrong_type", b"", "wrong type: column qty value 'lots' is not a INT")
        elif variant == 8:
            text = _csv(["\u00a0", *cells[1:]])
            rec = _bad("csv_blank_key", b"", "blank record key: event_id is empty")
        else:
            text = _csv(cells)
            first = _landed(i, "csv_exact_copy", text.encode(), row)
            recs.append(first)
            lines.append(text)
            rec = Record(b"", "csv_exact_copy", "copy", row["event_id"])
        recs.append(_with_raw(rec, text.encode()))
        lines.append(text)
    files.append(CsvFile("ordered.csv", ("\n".join(lines) + "\n").encode(), recs))

    # 2. reordered header, CRLF line ends.
    recs, lines = [], ["name,event_id,qty,amount,kind"]
    for k in range(rows_per_file):
        row, cells = plain(2000 + k)
        text = _csv([cells[4], cells[0], cells[2], cells[3], cells[1]])
        recs.append(_landed(2000 + k, "csv_reordered_header", text.encode(), row))
        lines.append(text)
    files.append(CsvFile("reordered.csv", ("\r\n".join(lines) + "\r\n").encode(), recs))

    # 3. a header column the table lacks: rescued as text.
    recs, lines = [], ["event_id,kind,qty,amount,name,extra"]
    for k in range(rows_per_file):
        row, cells = plain(3000 + k)
        text = _csv([*cells, f"x{k}"])
        rescued = f'{{"fields":{{"extra":"x{k}"}}}}'
        recs.append(_landed(3000 + k, "csv_extra_header_column", text.encode(), row, rescued))
        lines.append(text)
    files.append(CsvFile("extra.csv", ("\n".join(lines) + "\n").encode(), recs))

    # 4. a header without some columns: they are NULL.
    recs, lines = [], ["kind,event_id,qty"]
    for k in range(rows_per_file):
        row, cells = plain(4000 + k)
        row.update(amount=None, name=None)
        text = _csv([cells[1], cells[0], cells[2]])
        recs.append(_landed(4000 + k, "csv_missing_header_column", text.encode(), row))
        lines.append(text)
    files.append(CsvFile("missing.csv", ("\n".join(lines) + "\n").encode(), recs))

    # 5. a case-variant header name: rescued, the column is NULL.
    recs, lines = [], ["event_id,kind,QTY,amount,name"]
    for k in range(rows_per_file):
        row, cells = plain(5000 + k)
        rescued = f'{{"fields":{{"QTY":"{row["qty"]}"}}}}'
        row["qty"] = None
        text = _csv(cells)
        recs.append(_landed(5000 + k, "csv_case_variant_header", text.encode(), row, rescued))
        lines.append(text)
    files.append(CsvFile("case.csv", ("\n".join(lines) + "\n").encode(), recs))

    # 6. a repeated header name: the last lands, the other is rescued.
    recs, lines = [], ["event_id,kind,name,qty,amount,name"]
    for k in range(rows_per_file):
        row, cells = plain(6000 + k)
        text = _csv([cells[0], cells[1], f"old{k}", cells[2], cells[3], cells[4]])
        rescued = f'{{"duplicates":{{"name":["old{k}"]}}}}'
        recs.append(_landed(6000 + k, "csv_repeated_header", text.encode(), row, rescued))
        lines.append(text)
    files.append(CsvFile("repeated.csv", ("\n".join(lines) + "\n").encode(), recs))

    # 7. records that are not UTF-8, between good ones.
    recs, parts = [], [b"event_id,kind,qty,amount,name"]
    for k in range(rows_per_file):
        row, cells = plain(7000 + k)
        if k % 3 == 0:
            raw = _csv(cells[:4]).encode() + b",caf\xe9"
            recs.append(_bad("csv_invalid_utf8", raw, "invalid UTF-8"))
        else:
            raw = _csv(cells).encode()
            recs.append(_landed(7000 + k, "csv_plain", raw, row))
        parts.append(raw)
    files.append(CsvFile("latin1.csv", b"\n".join(parts) + b"\n", recs))
    return files


def _with_raw(record: Record, raw: bytes) -> Record:
    return Record(
        raw, record.kind, record.fate, record.event_id, record.values, record.rescued, record.reason
    )
