"""JSON records from exact text: parse each line or message with the table schema, keep its text.

Files are read as text (one row per line, with the file path) and Kafka values as bytes; both go
through `json_records`, so a record's fate does not depend on where it came from. Reading text
first, instead of Spark's JSON reader, keeps what that reader loses: the exact bytes of every
record (Spark's text reader does not decode them, so bytes that are not UTF-8 survive and
`is_valid_utf8` finds them), trailing text after an object (Spark's parser stops at the end of
the object and ignores the rest), and the fields the schema does not hold. Everything is a Spark
expression except the exact rescue (`quality.rescue`), which runs only on rows that a native
check flags: an unknown, case-variant or repeated key, or a non-string token after a STRING
column's key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StringType, StructField, StructType

from quality.rescue import rescued_json
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CORRUPT_COLUMN = "_lh_corrupt"
SOURCE_FILE_COLUMN = "_lh_source_file"
#: The exact text of each record as read (the reader's own column; never landed).
RECORD_COLUMN = "_lh_record"
#: A reason the reader found before parsing (invalid UTF-8, trailing text, undecodable file).
FAULT_COLUMN = "_lh_fault"
#: The codec whose magic number starts the line, else NULL: the file is undecodable only if its
#: first line starts so (`quality.fates.undecodable_files` confirms it).
MAGIC_COLUMN = "_lh_magic"
#: The record's text when the exact rescue must look at it, else NULL (see `with_rescued`).
RESCUE_INPUT_COLUMN = "_lh_rescue_input"
_LINE, _PARSED, _KEYS, _FLAG = "_lh_line", "_lh_parsed", "_lh_keys", "_lh_flag"

INVALID_UTF8 = "invalid UTF-8: the record's exact bytes are in _lh_raw_bytes"
TRAILING_TEXT = "malformed JSON: trailing text after the JSON object"
UNDECODABLE_PREFIX = "undecodable file: "
#: Magic numbers of compressed or binary formats, as hex: a file that starts with one and is read
#: as plain text (Spark picks a codec by file extension only) is one undecodable file.
MAGIC_NUMBERS = {
    "1F8B": "gzip",
    "425A68": "bzip2",
    "28B52FFD": "zstd",
    "FD377A585A00": "xz",
    "04224D18": "lz4",
    "FF060000734E61507059": "snappy",
    "504B0304": "zip",
}


def reader_option(options: Mapping[str, str] | None, name: str) -> str | None:
    """A reader option's value looked up with case ignored, as Spark matches option names."""
    wanted = name.lower()
    return next((v for k, v in (options or {}).items() if k.lower() == wanted), None)


def undecodable_reason(codec: Column) -> Column:
    """The file-level reason for a file holding `codec` data under a plain-text name."""
    return F.concat(
        F.lit(UNDECODABLE_PREFIX),
        codec,
        F.lit(
            "-compressed data in a file read as plain text; Spark chooses a codec by the file "
            "name, so land it with the codec's extension (e.g. .json.gz)"
        ),
    )


def magic_codec(text: Column) -> Column:
    """The compression format whose magic number starts the bytes of `text`, or null."""
    head = F.hex(F.substring(text.cast("binary"), 1, 10))
    codec: Column | None = None
    for magic, name in MAGIC_NUMBERS.items():
        hit = head.startswith(magic)
        codec = F.when(hit, F.lit(name)) if codec is None else codec.when(hit, F.lit(name))
    assert codec is not None
    return codec


def is_blank_line(text: Column) -> Column:
    """True for an empty or whitespace-only line: no record, as Spark's JSON reader skips it."""
    return text.rlike("^[\\s\\x{FEFF}]*$")


def json_records(
    frame: DataFrame,
    text: Column,
    schema: StructType,
    passthrough: list[Column],
    *,
    detect_files: bool = True,
    parse_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Parse `text` (one JSON object per row) into the schema's columns plus the reader columns.

    Returns the schema's columns (null when the record does not parse), `_lh_corrupt` (the text
    when it does not parse or fit), `_lh_record` (the exact text, always), `_lh_fault`,
    `_lh_rescue_input` (the text of the rows `with_rescued` must look at) and the `passthrough`
    columns. With `detect_files`, `_lh_magic` names the codec whose magic number starts a row's
    bytes: only a candidate, since a junk line inside a file may start with `BZh` or `PK\x03\x04`
    too; the file is undecodable only when its first line does (`quality.fates`), and the row
    keeps its own fault meanwhile. `parse_options` are Spark JSON options for `from_json`
    (`timestampFormat`, ...).
    """
    line = F.regexp_replace(text, "^\\x{FEFF}", "")
    fields = [StructField(f.name, f.dataType, True) for f in schema.fields]
    parse_schema = StructType([*fields, StructField(CORRUPT_COLUMN, StringType(), True)])
    options = {
        **(parse_options or {}),
        "mode": "PERMISSIVE",
        "columnNameOfCorruptRecord": CORRUPT_COLUMN,
    }
    staged = frame.select(
        text.alias(RECORD_COLUMN),
        line.alias(_LINE),
        F.from_json(line, parse_schema, options).alias(_PARSED),
        F.json_object_keys(line).alias(_KEYS),
        *passthrough,
    )
    record, parsed, keys = F.col(RECORD_COLUMN), F.col(_PARSED), F.col(_KEYS)
    wrapped = F.json_array_length(F.concat(F.lit("["), F.col(_LINE), F.lit("]")))
    fault = F.when(~F.is_valid_utf8(record), F.lit(INVALID_UTF8)).when(
        keys.isNotNull() & (F.coalesce(wrapped, F.lit(0)) != 1), F.lit(TRAILING_TEXT)
    )
    magic = [magic_codec(record).alias(MAGIC_COLUMN)] if detect_files else []
    magic_out = [F.col(MAGIC_COLUMN)] if detect_files else []
    names = [f.name for f in schema.fields]
    flagged = staged.select(
        "*",
        fault.alias(FAULT_COLUMN),
        rescue_flag(F.col(_LINE), keys, schema).alias(_FLAG),
        *magic,
    )
    # Spark's parser accepts what strict JSON does not (NaN, single quotes, ...); such a line has
    # no object keys under the strict parser and is malformed too, not landed half-read.
    corrupt = (
        F.when(F.col(FAULT_COLUMN).isNotNull(), record)
        .when(parsed.isNull() | keys.isNull(), F.coalesce(record, F.lit("")))
        .otherwise(parsed.getField(CORRUPT_COLUMN))
    )
    return flagged.select(
        *[F.when(corrupt.isNull(), parsed.getField(n)).alias(n) for n in names],
        corrupt.alias(CORRUPT_COLUMN),
        record,
        F.col(FAULT_COLUMN),
        F.when(corrupt.isNull() & F.col(_FLAG), F.col(_LINE)).alias(RESCUE_INPUT_COLUMN),
        *[F.col(c) for c in staged.columns[4:]],
        *magic_out,
    )


def rescue_flag(line: Column, keys: Column, schema: StructType) -> Column:
    """True when the record may hold something its columns cannot: the exact rescue runs on it.

    A key not among the columns (exact case), a key repeated, a non-string token after the key of
    a STRING column, a number after the key of a DECIMAL column with a non-zero digit beyond its
    scale or an exponent (Spark rounds it to fit), or an escape sequence in a key (whose decoded
    name the pattern cannot see). A false alarm costs only the Python check; a row not flagged
    has nothing to rescue.
    """
    names = F.array(*[F.lit(f.name) for f in schema.fields])
    unknown = F.exists(keys, lambda k: ~F.array_contains(names, k))
    repeated = F.size(keys) != F.size(F.array_distinct(keys))
    flag = unknown | repeated | line.rlike(r'"(?:[^"\\]|\\.)*\\(?:[^"\\]|\\.)*"\s*:')
    strings = [f.name for f in schema.fields if isinstance(f.dataType, StringType)]
    if strings:
        alternatives = "|".join(re.escape(s) for s in strings)
        flag = flag | line.rlike(f'"(?:{alternatives})"\\s*:\\s*[^\\s"]')
    by_scale: dict[int, list[str]] = {}
    for name, scale in decimal_scales(schema).items():
        by_scale.setdefault(scale, []).append(name)
    for scale, named in sorted(by_scale.items()):
        alternatives = "|".join(re.escape(n) for n in named)
        digits = f"(?:\\.[0-9]{{{scale}}}[0-9]*[1-9]|\\.?[0-9]*[eE])"
        flag = flag | line.rlike(f'"(?:{alternatives})"\\s*:\\s*"?\\s*[-+]?[0-9]*{digits}')
    return keys.isNotNull() & flag


def decimal_scales(schema: StructType) -> dict[str, int]:
    """The DECIMAL columns of a schema and their scales: Spark rounds a value to fit the scale."""
    return {f.name: f.dataType.scale for f in schema.fields if isinstance(f.dataType, DecimalType)}


def with_rescued(batch: DataFrame, schema: StructType) -> tuple[DataFrame, DataFrame | None]:
    """Replace `_lh_rescue_input` by `_lh_rescued`, running Python only on the rows flagged.

    Spark evaluates a Python UDF on every row that reaches it, whatever CASE surrounds it (about
    2 s per 20,000 rows here, the same as all the rest of the classification). A filter below
    the UDF does keep the other rows out, so the batch is persisted once and split: flagged rows
    through the UDF, the others with NULL. Returns the rows and the persisted frame, which the
    caller unpersists once it has materialised what it built on top (None if nothing was
    persisted: a batch without the input column is returned as it is).
    """
    from pyspark import StorageLevel

    if RESCUE_INPUT_COLUMN not in batch.columns:
        return batch, None
    names = [f.name for f in schema.fields]
    strings = [f.name for f in schema.fields if isinstance(f.dataType, StringType)]
    decimals = decimal_scales(schema)
    rescue = F.udf(lambda s: rescued_json(s, names, strings, decimals), StringType())
    cached = batch.persist(StorageLevel.MEMORY_AND_DISK)
    needs = F.col(RESCUE_INPUT_COLUMN).isNotNull()
    columns = [c for c in batch.columns if c != RESCUE_INPUT_COLUMN]
    plain = cached.where(~needs).select(*columns, F.lit(None).cast("string").alias(RESCUED_COLUMN))
    odd = cached.where(needs).select(
        *columns, rescue(F.col(RESCUE_INPUT_COLUMN)).alias(RESCUED_COLUMN)
    )
    return plain.unionByName(odd), cached
