"""CSV records from whole files: split exactly, map columns by header name, keep each record.

Spark's CSV reader maps columns by position (with `enforceSchema=false` it only checks the
header against the schema, by position again, and fails the read), gives no raw text for rows
that parse, and in `multiLine` mode cannot split a file. So a CSV file is read whole (one row
per file, its bytes undecoded) and split here, in Python, once per file:

- records end at a line break outside quotes, so a quoted field with a newline is one record;
- with a header (the default), each field goes to the column its header names; a header name
  that is not a column (or a case variant of one) is rescued, a repeated name lands its last
  field and rescues the others, a column the header lacks is NULL;
- each record keeps its exact bytes, and one that is not UTF-8 is never decoded; a header line
  that is not UTF-8 names no column, so every record of its file is quarantined (none is taken
  as the header in its place);
- a file that starts with a compression magic number is one undecodable-file record.

The fields are then typed by Spark (`try_cast`), and the rows go through the same
classification as JSON. Field rules follow Spark's CSV defaults: `"` quotes, `""` or `\\"`
inside quotes is a quote, an unquoted empty field is NULL, a quoted empty field is "". An empty
`quote` or `escape` option turns quoting or escaping off.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    StringType,
    StructField,
    StructType,
)

from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    INVALID_UTF8,
    MAGIC_NUMBERS,
    RECORD_COLUMN,
    SOURCE_FILE_COLUMN,
    UNDECODABLE_PREFIX,
    decimal_scales,
    reader_option,
)
from quality.rescue import as_json, is_rounded, render_fields
from tables.record_rules import DEFAULT_MAX_RECORD_BYTES, HEAD_CHARACTERS, RecordRules
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_RECORDS = "_lh_csv_records"
HEADER_NOT_UTF8 = (
    "malformed CSV: the file's header line is not valid UTF-8, so no record of the file can be "
    "matched to columns (each keeps its exact text or bytes)"
)
#: What the per-file split returns for each record.
RECORD_TYPE = StructType(
    [
        StructField("raw", BinaryType()),
        StructField("values", ArrayType(StringType())),
        StructField("fault", StringType()),
        StructField("rescued", StringType()),
    ]
)


def split_records(data: bytes, quote: str = '"', escape: str = "\\") -> Iterator[bytes]:
    """Split a file's bytes into records: at CR, LF or CRLF outside quotes, terminators dropped."""
    q, e = quote.encode(), escape.encode()
    start, i, quoted, n = 0, 0, False, len(data)
    while i < n:
        c = data[i : i + 1]
        if quoted and c == e and e != q and i + 1 < n:
            i += 2
            continue
        if c == q:
            quoted = not quoted
        elif not quoted and c in (b"\n", b"\r"):
            yield data[start:i]
            if c == b"\r" and data[i + 1 : i + 2] == b"\n":
                i += 1
            start = i + 1
        i += 1
    if start < n:
        yield data[start:n]


def split_fields(
    record: str, sep: str = ",", quote: str = '"', escape: str = "\\"
) -> list[str | None]:
    """Split one record into fields; an unquoted empty field is None, a quoted one is ""."""
    fields: list[str | None] = []
    current: list[str] = []
    quoted = was_quoted = False
    i, n = 0, len(record)
    while i < n:
        c = record[i]
        if quoted:
            if c == escape and escape != quote and i + 1 < n:
                current.append(record[i + 1])
                i += 2
                continue
            if c == quote:
                if record[i + 1 : i + 2] == quote:
                    current.append(quote)
                    i += 2
                    continue
                quoted = False
            else:
                current.append(c)
        elif c == quote and not current:
            quoted = was_quoted = True
        elif record.startswith(sep, i):
            fields.append("".join(current) if current or was_quoted else None)
            current, was_quoted = [], False
            i += len(sep)
            continue
        else:
            current.append(c)
        i += 1
    fields.append("".join(current) if current or was_quoted else None)
    return fields


def file_records(
    data: bytes | None,
    columns: Sequence[str],
    options: Mapping[str, str],
    decimals: Mapping[str, int] | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> list[dict[str, Any]]:
    """Every record of one CSV file as (raw bytes, values in column order, fault, rescued).

    `decimals` maps DECIMAL columns to their scale: a value Spark rounds to fit is rescued. A
    record longer than `max_record_bytes` is not split into fields: it keeps its first bytes
    and the reason (the header line is a record too).
    """
    if not data:
        return []
    head = data[:10].hex().upper()
    for magic, codec in MAGIC_NUMBERS.items():
        if head.startswith(magic):
            return [{"raw": None, "values": None, "fault": _undecodable(codec), "rescued": None}]
    sep = reader_option(options, "sep") or reader_option(options, "delimiter") or ","
    quote = _char_option(options, "quote", '"')
    escape = _char_option(options, "escape", "\\")
    has_header = str(reader_option(options, "header") or "true").lower() == "true"
    records = [r for r in split_records(data.removeprefix(b"\xef\xbb\xbf"), quote, escape)]
    records = [r for r in records if r.strip()]
    if has_header and records and not _is_utf8(records[0]):
        return [
            {"raw": r, "values": None, "fault": HEADER_NOT_UTF8, "rescued": None} for r in records
        ]
    header: list[str] | None = None
    out: list[dict[str, Any]] = []
    for raw in records:
        if len(raw) > max_record_bytes:
            if has_header and header is None:
                return [_header_too_large(r, max_record_bytes) for r in records]
            out.append(too_large(raw, max_record_bytes))
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            out.append({"raw": raw, "values": None, "fault": INVALID_UTF8, "rescued": None})
            continue
        fields = split_fields(text, sep, quote, escape)
        if has_header and header is None:
            header = [f or "" for f in fields]
            continue
        out.append({"raw": raw, **_mapped(fields, header, columns, decimals or {})})
    return out


def too_large(raw: bytes, max_record_bytes: int) -> dict[str, Any]:
    """A record past the table's `max_record_bytes`: its first characters and the reason."""
    fault = (
        f"record too large: {len(raw):,} bytes, over the table's max_record_bytes "
        f"({max_record_bytes:,}); _lh_raw holds its first {HEAD_CHARACTERS:,} characters"
    )
    return {"raw": _head(raw), "values": None, "fault": fault, "rescued": None}


def _header_too_large(raw: bytes, max_record_bytes: int) -> dict[str, Any]:
    """A record of a file whose header line is past `max_record_bytes`: no column is named."""
    fault = (
        f"malformed CSV: the file's header line is over the table's max_record_bytes "
        f"({max_record_bytes:,}), so no record of the file can be matched to columns"
    )
    kept = raw if len(raw) <= max_record_bytes else _head(raw)
    return {"raw": kept, "values": None, "fault": fault, "rescued": None}


def _head(raw: bytes) -> bytes:
    """The first `HEAD_CHARACTERS` characters of a record (whole UTF-8 sequences only)."""
    return raw[: HEAD_CHARACTERS * 4].decode("utf-8", "ignore")[:HEAD_CHARACTERS].encode()


def _char_option(options: Mapping[str, str], name: str, default: str) -> str:
    """A one-character option; given but empty turns it off (Spark reads "" as NUL)."""
    value = reader_option(options, name)
    return default if value is None else value


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _undecodable(codec: str) -> str:
    return (
        f"{UNDECODABLE_PREFIX}{codec}-compressed data in a file read as plain text; Spark "
        "chooses a codec by the file name, so land it with the codec's extension (e.g. .csv.gz)"
    )


def _mapped(
    fields: list[str | None],
    header: list[str] | None,
    columns: Sequence[str],
    decimals: Mapping[str, int],
) -> dict[str, Any]:
    """Values in column order by header name (by position without a header), and the rest:
    unknown and repeated names, and DECIMAL values rounded to fit (`converted`)."""
    names = header if header is not None else list(columns)
    if len(fields) != len(names):
        has = "the header has" if header is not None else "the table has"
        fault = f"malformed CSV: {len(fields)} fields, {has} {len(names)}"
        return {"values": None, "fault": fault, "rescued": None}
    known = set(columns)
    last: dict[str, str | None] = {}
    earlier: dict[str, list[str | None]] = {}
    for name, value in zip(names, fields, strict=True):
        if name in last:
            earlier.setdefault(name, []).append(last[name])
        last[name] = value
    values = [last.get(c) for c in columns]
    unknown = [(k, as_json(v)) for k, v in last.items() if k not in known]
    rounded = [
        (k, as_json(v))
        for k, v in last.items()
        if k in decimals and v is not None and is_rounded(v, decimals[k])
    ]
    repeated = [(k, [as_json(v) for v in vs]) for k, vs in earlier.items()]
    rescued = render_fields(unknown, rounded, repeated)
    return {"values": values, "fault": None, "rescued": rescued}


def csv_records(
    files: DataFrame,
    content: Column,
    schema: StructType,
    options: Mapping[str, str],
    rules: RecordRules | None = None,
) -> DataFrame:
    """Explode whole-file rows (`content` bytes, source file column) into typed CSV rows.

    Returns the schema's columns, `_lh_corrupt` (the record's text when it has the wrong number
    of fields or a value that does not convert, with the reason in `_lh_fault`), `_lh_record`,
    `_lh_rescued` and the source file, like `quality.records.json_records`.
    """
    names = [f.name for f in schema.fields]
    settings = dict(options)
    decimals = decimal_scales(schema)
    limit = (rules or RecordRules()).max_record_bytes
    split = F.udf(
        lambda data: file_records(data, names, settings, decimals, limit), ArrayType(RECORD_TYPE)
    )
    exploded = files.select(
        F.explode(split(content)).alias(_RECORDS), F.col(SOURCE_FILE_COLUMN)
    ).select(f"{_RECORDS}.*", SOURCE_FILE_COLUMN)
    values, raw = F.col("values"), F.col("raw").cast("string")
    typed = {
        f.name: values[i].try_cast(f.dataType)
        if not isinstance(f.dataType, StringType)
        else values[i]
        for i, f in enumerate(schema.fields)
    }
    wrong: Column | None = None
    for i, f in enumerate(schema.fields):
        if isinstance(f.dataType, StringType):
            continue
        bad = values[i].isNotNull() & typed[f.name].isNull()
        text = F.concat(
            F.lit(f"wrong type: column {f.name} value '"),
            F.substring(values[i], 1, 80),
            F.lit(f"' is not a {f.dataType.simpleString().upper()}"),
        )
        wrong = F.when(bad, text) if wrong is None else wrong.when(bad, text)
    fault = F.col("fault") if wrong is None else F.coalesce(F.col("fault"), wrong)
    staged = exploded.select("*", fault.alias(FAULT_COLUMN))
    corrupt = F.when(F.col(FAULT_COLUMN).isNotNull(), F.coalesce(raw, F.lit("")))
    return staged.select(
        *[F.when(corrupt.isNull(), typed[n]).alias(n) for n in names],
        corrupt.alias(CORRUPT_COLUMN),
        raw.alias(RECORD_COLUMN),
        F.col(FAULT_COLUMN),
        F.col("rescued").alias(RESCUED_COLUMN),
        F.col(SOURCE_FILE_COLUMN),
    )
