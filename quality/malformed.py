"""Classify each input row as landable, a copy, or rejected with a reason that names the fault.

A row is rejected if the reader found a fault in its bytes (not UTF-8, trailing text after the
JSON object, a compressed file read as text), if the reader could not parse it against the table
schema (the reader's corrupt-record column is set), if it has rescued content and the table's
`unknown_fields` is `quarantine`, if a record key is null or blank (empty, or only Unicode
whitespace, format or control characters), if a NOT NULL column is null, if
a floating-point column holds an infinity or NaN (JSON and CSV readers turn `1e400` into
Infinity without complaint), or if another row of the batch has the same record key with
different content. Exact copies of a kept row are not rejected: they are the same record, dropped
and counted. Every decision depends on the batch's rows alone, so a replay of the batch puts each
row on the same side.

For a row that does not parse, the reason says why, from the raw text: not JSON at all, JSON that
is not an object, a CSV row with the wrong number of fields (Spark's PERMISSIVE mode would drop
extra tokens silently without the corrupt-record column), or the first column whose value does
not convert to its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    FloatType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from quality.quarantine import RAW_BYTES_COLUMN, RAW_COLUMN, REASON_COLUMN, SOURCE_COLUMN
from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    RECORD_COLUMN,
    SOURCE_FILE_COLUMN,
    reader_option,
)
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

    from tables.spec import TableSpec

__all__ = ["CORRUPT_COLUMN", "FAULT_COLUMN", "RECORD_COLUMN", "SOURCE_FILE_COLUMN"]

ROW_HASH_COLUMN = "_lh_row_hash"
COPY_COLUMN = "_lh_copy"
#: A quoted CSV field, with backslash or doubled-quote escapes, removed before counting separators.
#: Possessive, so `java.util.regex` does not recurse once per character of a long field; an
#: unterminated field runs to the end, so no later quote starts a scan of the rest again.
_QUOTED_FIELD = r'(?s)"(?:[^"\\]++|\\.|"")*+(?:"|\z)'
#: A value with nothing visible in it: Unicode separators, whitespace, control and format
#: characters (zero-width space, BOM, ...). Spark's `trim` strips only the space character.
BLANK_PATTERN = r"^[\p{Z}\s\p{Cc}\p{Cf}]*$"
_CHECKED_TYPES = (
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "decimal",
    "boolean",
    "date",
    "timestamp",
    "timestamp_ntz",
)


def unparsed_reason(
    schema: StructType, raw_format: str | None, options: Mapping[str, str] | None = None
) -> Column:
    """Why the reader's corrupt-record text did not parse, as precisely as the text shows."""
    raw = F.col(CORRUPT_COLUMN)
    generic = F.lit("malformed record: does not parse with the table schema")
    if raw_format == "json":
        tokens = {f.name: F.get_json_object(raw, f"$.{f.name}") for f in schema.fields}
        return (
            F.when(
                F.get_json_object(raw, "$").isNull(),
                F.lit("malformed JSON: not valid JSON (truncated or broken)"),
            )
            .when(
                F.json_object_keys(raw).isNull(),
                F.lit("malformed JSON: the record is an array or a bare value, not an object"),
            )
            .otherwise(F.coalesce(type_mismatch(schema, tokens), generic))
        )
    if raw_format == "csv":
        sep = reader_option(options, "sep") or reader_option(options, "delimiter") or ","
        stripped = F.regexp_replace(raw, _QUOTED_FIELD, "")
        found = F.size(F.split(stripped, f"\\Q{sep}\\E", -1))
        expected = len(schema.fields)
        as_text = StructType([StructField(f.name, StringType()) for f in schema.fields])
        parsed = F.from_csv(raw, as_text.simpleString(), {"sep": sep})
        tokens = {f.name: parsed[f.name] for f in schema.fields}
        return F.when(
            found != expected,
            F.concat(
                F.lit("malformed CSV: "),
                found.cast("string"),
                F.lit(f" fields, the table has {expected}"),
            ),
        ).otherwise(F.coalesce(type_mismatch(schema, tokens), generic))
    return generic


def type_mismatch(schema: StructType, tokens: Mapping[str, Column]) -> Column:
    """The first column whose raw value is present but does not convert to its type, or null."""
    reason: Column | None = None
    for column in schema.fields:
        if column.dataType.typeName() not in _CHECKED_TYPES:
            continue
        token = tokens[column.name]
        bad = token.isNotNull() & (F.trim(token) != "") & token.try_cast(column.dataType).isNull()
        text = F.concat(
            F.lit(f"wrong type: column {column.name} value '"),
            F.substring(token, 1, 80),
            F.lit(f"' is not a {_type_label(column.dataType)}"),
        )
        reason = F.when(bad, text) if reason is None else reason.when(bad, text)
    return reason if reason is not None else F.lit(None).cast("string")


def rejection_reason(
    schema: StructType,
    keys: tuple[str, ...],
    columns: list[str],
    raw_format: str | None = None,
    options: Mapping[str, str] | None = None,
    unknown_fields: str = "rescue",
    sequence_by: str | None = None,
) -> Column:
    """A string column: why the row cannot land, judged from the row alone, or null if it can.

    `columns` are the columns present in the batch; the reader's fault, corrupt-record and
    rescued columns are used when the reader provided them. An upsert table's `sequence_by`
    column must hold a value: without one a version cannot be ordered against the others.
    """
    checks: list[tuple[Column, Column]] = []
    if FAULT_COLUMN in columns:
        checks.append((F.col(FAULT_COLUMN).isNotNull(), F.col(FAULT_COLUMN)))
    if CORRUPT_COLUMN in columns:
        checks.append(
            (F.col(CORRUPT_COLUMN).isNotNull(), unparsed_reason(schema, raw_format, options))
        )
    if RESCUED_COLUMN in columns and unknown_fields == "quarantine":
        rescued = F.col(RESCUED_COLUMN)
        checks.append(
            (
                rescued.isNotNull(),
                F.concat(
                    F.lit("unknown fields: "),
                    rescued_summary(rescued),
                    F.lit(" (the table's unknown_fields is quarantine)"),
                ),
            )
        )
    for key in keys:
        checks.append((F.col(key).isNull(), F.lit(f"missing record key: {key} is null")))
        if isinstance(schema[key].dataType, StringType):
            checks.append(
                (
                    F.col(key).rlike(BLANK_PATTERN),
                    F.lit(
                        f"blank record key: {key} is empty or holds only whitespace or "
                        "invisible characters"
                    ),
                )
            )
    if sequence_by is not None:
        checks.append(
            (
                F.col(sequence_by).isNull(),
                F.lit(
                    f"missing sequence: {sequence_by} is null, so this version of the record "
                    "cannot be ordered against others (the table's sequence_by)"
                ),
            )
        )
    for column in schema.fields:
        if not column.nullable and column.name not in keys:
            checks.append(
                (
                    F.col(column.name).isNull(),
                    F.lit(f"missing required field: {column.name} is null"),
                )
            )
    for column in schema.fields:
        if isinstance(column.dataType, DoubleType | FloatType):
            value = F.col(column.name)
            checks.append(
                (
                    F.isnan(value) | (F.abs(value) == float("inf")),
                    F.lit(f"out of range: column {column.name} is not a finite number"),
                )
            )
    if not checks:
        return F.lit(None).cast("string")
    condition, text = checks[0]
    reason = F.when(condition, text)
    for condition, text in checks[1:]:
        reason = reason.when(condition, text)
    return reason


def rescued_summary(rescued: Column) -> Column:
    """The fields a rescued JSON names, e.g. `QTY, extra (not in the schema)`."""

    def part(member: str, label: str) -> Column:
        names = F.json_object_keys(F.get_json_object(rescued, f"$.{member}"))
        return F.when(names.isNotNull(), F.concat(F.array_join(names, ", "), F.lit(f" ({label})")))

    return F.concat_ws(
        "; ",
        part("fields", "not in the schema"),
        part("converted", "converted to fit the column"),
        part("duplicates", "repeated in the record"),
    )


def row_hash(schema: StructType, columns: list[str]) -> Column:
    """A 64-bit hash of a row's data, corrupt and rescued text: the same for the same content."""
    types = {f.name: f.dataType for f in schema.fields}
    hashed = [c for c in columns if c in (*schema.fieldNames(), CORRUPT_COLUMN, RESCUED_COLUMN)]
    return F.xxhash64(*[_hashable(F.col(c), types.get(c)) for c in hashed])


def classify_rows(
    batch: DataFrame,
    schema: StructType,
    keys: tuple[str, ...],
    raw_format: str | None = None,
    options: Mapping[str, str] | None = None,
    unknown_fields: str = "rescue",
    sequence_by: str | None = None,
) -> DataFrame:
    """Add the row-local reason, source and row-hash columns (no shuffle).

    The raw record is not among them: `with_raw_record` adds it to the rejected rows only.
    """
    columns = batch.columns
    source = F.col(SOURCE_FILE_COLUMN) if SOURCE_FILE_COLUMN in columns else F.lit(None)
    reason = rejection_reason(
        schema, keys, columns, raw_format, options, unknown_fields, sequence_by
    )
    return batch.select(
        *[F.col(c) for c in columns],
        reason.alias(REASON_COLUMN),
        source.cast("string").alias(SOURCE_COLUMN),
        row_hash(schema, columns).alias(ROW_HASH_COLUMN),
    )


def mark_duplicates(classified: DataFrame, schema: StructType, keys: tuple[str, ...]) -> DataFrame:
    """Among valid rows sharing a record key, keep the smallest; mark copies, reject conflicts.

    The kept row is chosen by value, never by arrival order, so a retried batch keeps the same row
    whatever its partitioning. A row identical to the kept one is a copy (dropped and counted); a
    row with the same key and different content is rejected with a reason naming the key.
    """
    others = [f for f in schema.fields if f.name not in keys]
    orderable = others and not any(isinstance(f.dataType, MapType) for f in others)
    rescued = [RESCUED_COLUMN] if RESCUED_COLUMN in classified.columns else []
    content = F.struct(*[f.name for f in others], *rescued) if orderable else F.col(ROW_HASH_COLUMN)
    valid = F.col(REASON_COLUMN).isNull()
    window = Window.partitionBy(*[F.col(k) for k in keys], valid).orderBy(
        content, F.col(ROW_HASH_COLUMN)
    )
    rank = F.row_number().over(window)
    same_as_kept = F.col(ROW_HASH_COLUMN) == F.first(F.col(ROW_HASH_COLUMN)).over(window)
    key_text = F.concat_ws(", ", *[F.concat(F.lit(f"{k}="), F.col(k).cast("string")) for k in keys])
    conflict = F.concat(
        F.lit("conflicting duplicate: record key "),
        key_text,
        F.lit(" appears in the batch with different content; the smallest row was kept"),
    )
    marked = classified.select(
        *[c for c in classified.columns if c != REASON_COLUMN],
        F.when(valid & (rank > 1) & ~same_as_kept, conflict)
        .otherwise(F.col(REASON_COLUMN))
        .alias(REASON_COLUMN),
        (valid & (rank > 1) & same_as_kept).alias(COPY_COLUMN),
    )
    return marked.select(*classified.columns, COPY_COLUMN)


@dataclass(frozen=True)
class RecordFormat:
    """How a batch's records were read: the format of their raw text and the reader's options.

    A record that does not parse gets a reason naming its fault in that format.
    """

    raw_format: str | None = None
    options: Mapping[str, str] | None = None


def classify(
    batch: DataFrame,
    spec: TableSpec,
    schema: StructType,
    read: RecordFormat | None = None,
    *,
    one_task: bool = False,
) -> DataFrame:
    """Classify every row of a batch: row-local reasons, then duplicates within the batch.

    With `sequence_by` (an upsert table), versions of a key with different sequence values are
    not duplicates: a copy or a conflict is a second row with the same key and sequence value.
    With `one_task` the whole batch is one partition from its read on: the duplicate search
    needs no shuffle, and what reads the result (its figures, its write) no more than one task.
    """
    read = read or RecordFormat()
    keys, sequence_by = spec.keys, spec.sequence_by
    rows = classify_rows(
        batch, schema, keys, read.raw_format, read.options, spec.unknown_fields, sequence_by
    )
    if one_task:  # after the row-local steps: a Python step between would hide the partitioning
        rows = rows.coalesce(1)
    marked = mark_duplicates(rows, schema, keys if sequence_by is None else (*keys, sequence_by))
    keep_records = any(e.action == "quarantine" for e in spec.expectations)
    if RECORD_COLUMN not in marked.columns or keep_records:
        return marked
    # Only a rejected row's exact text is kept (for its `_lh_raw`): a landed row holds its
    # values, and the batch is persisted from here on, once instead of twice over. An
    # expectation that quarantines rejects rows later: its caller keeps every text.
    kept = F.when(F.col(REASON_COLUMN).isNotNull(), F.col(RECORD_COLUMN)).alias(RECORD_COLUMN)
    return marked.select(*[kept if c == RECORD_COLUMN else F.col(c) for c in marked.columns])


def with_raw_record(rejected: DataFrame, schema: StructType) -> DataFrame:
    """Add each rejected row's input: `_lh_raw` text, or `_lh_raw_bytes` for bytes not UTF-8.

    The raw text is the record exactly as the source delivered it when the reader kept it (JSON
    lines and Kafka values, CSV records), else the reader's corrupt text, else (rows built by a
    caller, Parquet) the row as JSON. Bytes that are not UTF-8 are never decoded into text: the
    row gets NULL `_lh_raw` and its exact bytes in `_lh_raw_bytes`. Done for the rejected rows
    alone, at quarantine time.
    """
    if RECORD_COLUMN not in rejected.columns:
        as_json = F.to_json(F.struct(*[F.col(f.name) for f in schema.fields]))
        has_corrupt = CORRUPT_COLUMN in rejected.columns
        raw = F.coalesce(F.col(CORRUPT_COLUMN), as_json) if has_corrupt else as_json
        return rejected.withColumn(RAW_COLUMN, raw).withColumn(
            RAW_BYTES_COLUMN, F.lit(None).cast("binary")
        )
    # The reader kept every record's text: no stand-in, even where it is NULL (a file-level
    # row of an undecodable file has none).
    record = F.col(RECORD_COLUMN)
    invalid = record.isNotNull() & ~F.is_valid_utf8(record)
    return rejected.withColumn(RAW_COLUMN, F.when(~invalid, record)).withColumn(
        RAW_BYTES_COLUMN, F.when(invalid, record.cast("binary"))
    )


def landable_rows() -> Column:
    """The rows that go into the MERGE: no reason, not a copy of a kept row."""
    return F.col(REASON_COLUMN).isNull() & ~F.col(COPY_COLUMN)


def _hashable(column: Column, data_type: DataType | None) -> Column:
    return F.to_json(column) if isinstance(data_type, MapType) else column


def _type_label(data_type: DataType) -> str:
    return data_type.simpleString().upper()
