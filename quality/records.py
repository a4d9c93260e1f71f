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
from types import MappingProxyType
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    DecimalType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from quality.rescue import (
    TRAILING_TEXT,
    has_trailing_text,
    parse_failure,
    rescued_from,
    top_level_members,
)
from tables.engine.jvm import gateway_process
from tables.faults import crash_reader, record_crash
from tables.record_rules import HEAD_CHARACTERS, RecordRules
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
_SIZE, _EPOCHS, _STEP, _WRAPPED = "_lh_size", "_lh_epochs", "_lh_step", "_lh_wrapped"
_CRASH = "_lh_crash"
_STEP_TYPE = StructType([StructField("rescued", StringType()), StructField("fault", StringType())])
#: `from_json` options that make its parse strict JSON: Spark's defaults accept single quotes
#: and NaN/Infinity, which docs/records.md quarantines as `not valid JSON`.
STRICT_JSON = MappingProxyType(
    {"mode": "PERMISSIVE", "allowSingleQuotes": "false", "allowNonNumericNumbers": "false"}
)
_TEMPORAL = (TimestampType, TimestampNTZType, DateType)
#: `schema_of_variant` names of a JSON number.
_NUMERIC_VARIANT = "^(?:TINYINT|SMALLINT|INT|BIGINT|DECIMAL|FLOAT|DOUBLE)"
_UNIT_MICROS = MappingProxyType({"seconds": 1_000_000, "milliseconds": 1_000, "microseconds": 1})
#: Spark's timestamp range, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, in microseconds.
_MIN_MICROS, _MAX_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999

INVALID_UTF8 = "invalid UTF-8: the record's exact bytes are in _lh_raw_bytes"
UNDECODABLE_PREFIX = "undecodable file: "
#: Magic numbers of compressed or binary formats, as hex: a file that starts with one and is read
#: as plain text (Spark picks a codec by file extension only) is one undecodable file.
MAGIC_NUMBERS = MappingProxyType(
    {
        "1F8B": "gzip",
        "425A68": "bzip2",
        "28B52FFD": "zstd",
        "FD377A585A00": "xz",
        "04224D18": "lz4",
        "FF060000734E61507059": "snappy",
        "504B0304": "zip",
    }
)


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


#: A key with an escape sequence: a JSON string holding a backslash, then a colon. Stack-safe:
#: the string's body is `[^"\\]` runs and escape pairs, each taken possessively. Linear, and
#: cheap where it fails: a match starts only where a key can (after `{` or `,`), which no
#: escaped quote inside a long value is; the scan of a string is never begun again.
ESCAPED_KEY = r'[{,]\s*+"[^"\\]*+\\.(?:[^"\\]++|\\.)*+"\s*+:'


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
    rules: RecordRules | None = None,
) -> DataFrame:
    """Parse `text` (one JSON object per row) into the schema's columns plus the reader columns.

    Returns the schema's columns (null when the record does not parse), `_lh_corrupt` (the text
    when it does not parse or fit), `_lh_record` (the exact text, always; the first characters
    of a record over `max_record_bytes`), `_lh_fault`, `_lh_rescue_input` (the text of the rows
    the Python step must look at: see `with_rescued`) and the `passthrough` columns. With
    `detect_files`, `_lh_magic` names the codec whose magic number starts a row's bytes: only a
    candidate, since a junk line inside a file may start with `BZh` or `PK\x03\x04` too; the
    file is undecodable only when its first line does (`quality.fates`), and the row keeps its
    own fault meanwhile. `parse_options` are Spark JSON options for `from_json`
    (`timestampFormat`, ...); the parse is strict JSON whatever they say.
    """
    rules = rules or RecordRules()
    size = F.octet_length(text)
    too_large = size > F.lit(rules.max_record_bytes)
    line = F.when(~too_large, F.regexp_replace(text, "^\\x{FEFF}", ""))
    fields = [StructField(f.name, f.dataType, True) for f in schema.fields]
    parse_schema = StructType([*fields, StructField(CORRUPT_COLUMN, StringType(), True)])
    options = {**(parse_options or {}), **STRICT_JSON, "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    epochs = epoch_probe(line, schema)
    staged = frame.select(
        F.when(too_large, F.substring(text, 1, HEAD_CHARACTERS))
        .otherwise(text)
        .alias(RECORD_COLUMN),
        line.alias(_LINE),
        F.from_json(line, parse_schema, options).alias(_PARSED),
        F.json_object_keys(line).alias(_KEYS),
        size.alias(_SIZE),
        *([epochs.alias(_EPOCHS)] if epochs is not None else []),
        *passthrough,
    )
    passed = staged.columns[len(staged.columns) - len(passthrough) :]
    record, parsed, keys = F.col(RECORD_COLUMN), F.col(_PARSED), F.col(_KEYS)
    wrapped = F.json_array_length(F.concat(F.lit("["), F.col(_LINE), F.lit("]")))
    fault = F.when(F.col(_SIZE) > F.lit(rules.max_record_bytes), too_large_reason(rules)).when(
        ~F.is_valid_utf8(record), F.lit(INVALID_UTF8)
    )
    # Wrapped in an array, a record 1,000 levels deep passes the parser's limit: a null length
    # is left to the Python step, which looks for trailing text itself.
    fault = fault.when(keys.isNotNull() & (wrapped != 1), F.lit(TRAILING_TEXT))
    values = {f.name: parsed.getField(f.name) for f in schema.fields}
    if epochs is not None:
        for column in epoch_columns(schema):
            number = F.col(_EPOCHS).getField(column.name)
            reason, value = epoch_rule(number, column, rules.timestamp_unit)
            fault = fault.when(parsed.isNotNull() & reason.isNotNull(), reason)
            values[column.name] = F.coalesce(value, values[column.name])
    crash = record_crash()
    if crash is not None:  # a test's fault point: a marked record crashes its reader
        staged = staged.withColumn(_CRASH, crash_expression(crash, record, frame.sparkSession))
        fault = F.when(F.col(_CRASH).isNotNull(), F.col(_CRASH)).otherwise(fault)
    magic = [magic_codec(record).alias(MAGIC_COLUMN)] if detect_files else []
    magic_out = [F.col(MAGIC_COLUMN)] if detect_files else []
    flagged = staged.select(
        "*",
        fault.alias(FAULT_COLUMN),
        rescue_flag(F.col(_LINE), keys, schema).alias(_FLAG),
        wrapped.alias(_WRAPPED),
        *magic,
    )
    # Spark's parser accepts what strict JSON does not (NaN, single quotes, ...) unless told
    # otherwise (`STRICT_JSON`); a line without object keys under the strict parser is
    # malformed too, not landed half-read.
    corrupt = (
        F.when(F.col(FAULT_COLUMN).isNotNull(), record)
        .when(parsed.isNull() | keys.isNull(), F.coalesce(record, F.lit("")))
        .otherwise(parsed.getField(CORRUPT_COLUMN))
    )
    # The Python step (`with_rescued`) looks at rows the native checks flag for rescue, and at
    # rows the parser refused without a fault, to say why (a parser limit, not JSON, not an
    # object).
    unsure = F.col(_KEYS).isNotNull() & F.col(_WRAPPED).isNull()
    python = F.col(FAULT_COLUMN).isNull() & (corrupt.isNotNull() | F.col(_FLAG) | unsure)
    return flagged.select(
        *[F.when(corrupt.isNull(), values[n]).alias(n) for n in schema.fieldNames()],
        corrupt.alias(CORRUPT_COLUMN),
        record,
        F.col(FAULT_COLUMN),
        F.when(python, F.col(_LINE)).alias(RESCUE_INPUT_COLUMN),
        *[F.col(c) for c in passed],
        *magic_out,
    )


def crash_expression(crash: str, record: Column, spark: SparkSession) -> Column:
    """The fault point of `tables.faults.record_crash`: a marked record ends its reader.

    A Python UDF, which Spark treats as deterministic, so filters still pass below it.
    """
    pid = gateway_process(spark).pid if crash == "jvm" else None
    return F.udf(lambda text: crash_reader(text, pid), StringType())(record)


def too_large_reason(rules: RecordRules) -> Column:
    """The quarantine reason of a record over the table's `max_record_bytes`."""
    return F.concat(
        F.lit("record too large: "),
        F.format_number(F.col(_SIZE), 0),
        F.lit(
            f" bytes, over the table's max_record_bytes ({rules.max_record_bytes:,}); "
            f"_lh_raw holds its first {HEAD_CHARACTERS:,} characters"
        ),
    )


def epoch_columns(schema: StructType) -> list[StructField]:
    """The TIMESTAMP, TIMESTAMP_NTZ and DATE columns: Spark reads a number there as seconds."""
    return [f for f in schema.fields if isinstance(f.dataType, _TEMPORAL)]


def epoch_probe(line: Column, schema: StructType) -> Column | None:
    """Each temporal column's token when it is a JSON number, else null (null if none can be).

    A pattern finds lines that may hold a number right after such a column's key; only those are
    parsed again, the temporal columns as VARIANT, whose type says number or string (Spark's own
    parse turns `1790000000` into a time without a trace). A match inside a nested object is
    only a false alarm: the VARIANT parse reads the top level.
    """
    columns = epoch_columns(schema)
    if not columns:
        return None
    names = "|".join(re.escape(c.name) for c in columns)
    maybe = line.rlike(f'"(?:{names})"\\s*+:\\s*+-?[0-9]')
    probe_schema = StructType([StructField(c.name, VariantType()) for c in columns])
    probe = F.from_json(line, probe_schema, {**STRICT_JSON})
    numbers = [
        F.when(
            F.schema_of_variant(probe.getField(c.name)).rlike(_NUMERIC_VARIANT),
            F.try_variant_get(probe.getField(c.name), "$", "string"),
        ).alias(c.name)
        for c in columns
    ]
    return F.when(maybe, F.struct(*numbers))


def epoch_rule(number: Column, column: StructField, unit: str | None) -> tuple[Column, Column]:
    """(the quarantine reason, the converted value) for an epoch number in a temporal column.

    Without a `timestamp_unit`, or in a DATE column, the number is quarantined. With one, a
    whole number within Spark's timestamp range (years 1 to 9999) lands converted exactly; any
    other number is quarantined.
    """
    label = column.dataType.simpleString().upper()
    shown = F.concat(F.lit(f"wrong type: column {column.name} value '"), F.substring(number, 1, 80))
    if unit is None or isinstance(column.dataType, DateType):
        hint = (
            "a DATE column takes dates as text"
            if isinstance(column.dataType, DateType)
            else "set the table's timestamp_unit to land epoch numbers"
        )
        reason = F.when(
            number.isNotNull(), F.concat(shown, F.lit(f"' is a number, not a {label} ({hint})"))
        )
        return reason, F.lit(None)
    scale = _UNIT_MICROS[unit]
    whole = number.try_cast("bigint")
    in_range = whole.between(_MIN_MICROS // scale, _MAX_MICROS // scale)
    reason = F.when(
        number.isNotNull() & (whole.isNull() | ~in_range | ~number.rlike("^-?[0-9]++$")),
        F.concat(
            shown,
            F.lit(f"' is not a whole number of {unit} within years 1 to 9999 (timestamp_unit)"),
        ),
    )
    micros = F.timestamp_micros(whole * F.lit(scale))
    value = F.when(number.isNotNull() & in_range, micros.cast(column.dataType))
    return reason, value


def rescue_flag(line: Column, keys: Column, schema: StructType) -> Column:
    """True when the record may hold something its columns cannot: the exact rescue runs on it.

    A key not among the columns (exact case), a key repeated, a non-string token after the key of
    a STRING column, a number after the key of a DECIMAL column with a non-zero digit beyond its
    scale or an exponent (Spark rounds it to fit), or an escape sequence in a key (whose decoded
    name the pattern cannot see). A false alarm costs only the Python check; a row not flagged
    has nothing to rescue. Every repetition in the patterns is possessive and none repeats an
    alternation: `java.util.regex` recurses once per repetition of a group such as
    `(?:[^"\\\\]|\\\\.)*`, and a 2,000-character value overflowed the executor's stack.
    """
    names = F.array(*[F.lit(f.name) for f in schema.fields])
    unknown = F.exists(keys, lambda k: ~F.array_contains(names, k))
    repeated = F.size(keys) != F.size(F.array_distinct(keys))
    flag = unknown | repeated | line.rlike(ESCAPED_KEY)
    strings = [f.name for f in schema.fields if isinstance(f.dataType, StringType)]
    if strings:
        alternatives = "|".join(re.escape(s) for s in strings)
        flag = flag | line.rlike(f'"(?:{alternatives})"\\s*+:\\s*+[^\\s"]')
    by_scale: dict[int, list[str]] = {}
    for name, scale in decimal_scales(schema).items():
        by_scale.setdefault(scale, []).append(name)
    for scale, named in sorted(by_scale.items()):
        alternatives = "|".join(re.escape(n) for n in named)
        digits = f"(?:\\.[0-9]{{{scale}}}[0-9]*[1-9]|\\.?[0-9]*+[eE])"
        flag = flag | line.rlike(f'"(?:{alternatives})"\\s*+:\\s*+"?\\s*+[-+]?[0-9]*{digits}')
    return keys.isNotNull() & flag


def decimal_scales(schema: StructType) -> dict[str, int]:
    """The DECIMAL columns of a schema and their scales: Spark rounds a value to fit the scale."""
    return {f.name: f.dataType.scale for f in schema.fields if isinstance(f.dataType, DecimalType)}


def python_step(
    text: str | None,
    parsed: bool,
    names: list[str],
    strings: list[str],
    decimals: Mapping[str, int],
) -> tuple[str | None, str | None]:
    """(rescued content, fault) of one row of the Python step: rescue if it parsed, else why not.

    A row that parsed may still end in trailing text the native check could not see (its
    wrapped parse hit the parser's depth limit): that is its fault.
    """
    if text is None:
        return None, None
    if not parsed:
        return None, parse_failure(text)
    members = top_level_members(text)
    if members is None:
        return None, TRAILING_TEXT if has_trailing_text(text) else None
    return rescued_from(members, names, strings, decimals), None


def with_rescued(batch: DataFrame, schema: StructType) -> DataFrame:
    """Replace `_lh_rescue_input` by `_lh_rescued`, with Python's work on the rows flagged only.

    A flagged row that parsed gets its exact rescued content (`quality.rescue.rescued_json`); a
    row the parser refused gets its precise reason in `_lh_fault` (`quality.rescue
    .parse_failure`: a parser limit, not JSON, not an object), or keeps none when it is a JSON
    object whose values do not fit (the classification names the column).

    Spark hands a Python UDF every row that reaches it, whatever CASE surrounds it, but the
    input is NULL for the rows not flagged, and a NULL crosses to the worker and back at little
    cost: 10,000 rows of 4 KiB took 0.93 s with the step against 0.84 s without it, where
    persisting the batch to split it (the way before) took 1.72 s. A batch without the input
    column is returned as it is.
    """
    if RESCUE_INPUT_COLUMN not in batch.columns:
        return batch
    names = [f.name for f in schema.fields]
    strings = [f.name for f in schema.fields if isinstance(f.dataType, StringType)]
    decimals = decimal_scales(schema)
    python = F.udf(
        lambda text, parsed: python_step(text, parsed, names, strings, decimals), _STEP_TYPE
    )
    columns = [c for c in batch.columns if c != RESCUE_INPUT_COLUMN]
    stepped = batch.select(
        *columns, python(F.col(RESCUE_INPUT_COLUMN), F.col(CORRUPT_COLUMN).isNull()).alias(_STEP)
    )
    fault = F.coalesce(F.col(FAULT_COLUMN), F.col(f"{_STEP}.fault")).alias(FAULT_COLUMN)
    return stepped.select(
        *[fault if c == FAULT_COLUMN else F.col(c) for c in columns],
        F.col(f"{_STEP}.rescued").alias(RESCUED_COLUMN),
    )
