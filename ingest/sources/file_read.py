"""Reading a landing directory: raw records from the stream or given files, parsed per batch.

JSON files are read as text lines and CSV files whole, both without decoding their bytes, and
parsed by the quality layer (`quality.records`, `quality.csv_records`). The stream yields the
raw records (text, file) and `parse_raw` shapes each micro-batch: Spark hands foreachBatch a
micro-batch as an opaque scan of the whole stream plan, so a parse inside the stream would run on
every row whatever a later filter says, while a parse on top of the raw batch lets a filter on
the record text (`ingest.isolation`) run before it. Parquet is read with the table schema by
Spark's own reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ingest.sources.file_options import TEXT_OPTIONS
from ingest.sources.fingerprint import FileStatuses
from ingest.sources.long_lines import (
    as_uri,
    copies_root,
    copy_location,
    copy_without,
    is_suspect,
    long_line_rows,
    scan_long_lines,
)
from quality.csv_records import csv_records
from quality.records import CORRUPT_COLUMN, SOURCE_FILE_COLUMN, is_blank_line, json_records
from tables.engine.storage import exists, file_status
from tables.identifiers import literal_path
from tables.record_rules import RecordRules

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader

    from ingest.sources.files import FileSource

FileFormat = Literal["json", "csv", "parquet"]
DEFAULT_OPTIONS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "json": {},
        "csv": {"header": "true"},
        "parquet": {},
    }
)
_VALUE = "value"


def read_stream(spark: SparkSession, source: FileSource, schema: StructType) -> DataFrame:
    """Open the landing directory as a stream: raw records (JSON, CSV) or typed rows (Parquet)."""
    reader = spark.readStream
    if source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    if source.clean_source != "off":  # done by Spark after the batch's checkpoint
        reader = reader.option("cleanSource", source.clean_source)
    if source.archive_dir is not None:
        reader = reader.option("sourceArchiveDir", source.archive_dir)
    if source.format in ("json", "csv"):
        return _raw(_text_reader(reader, source), source, source.path)
    read_schema, options = _reader_settings(source, schema)
    stream = reader.format(source.format).schema(read_schema).options(**options)
    return _with_reader_columns(stream.load(source.path), source, schema)


def read_files(
    spark: SparkSession,
    source: FileSource,
    schema: StructType,
    files: list[str],
    rules: RecordRules | None = None,
) -> DataFrame:
    """Read given files of the source as one batch, exactly as the stream reads them.

    `files` are paths, each read as that one file (glob characters in a name are escaped).
    """
    rules = rules or RecordRules()
    if source.format == "json":
        return vetted_json(spark, source, schema, {f: file_status(spark, f) for f in files}, rules)[
            0
        ]
    paths = [literal_path(f) for f in files]
    if source.format == "csv":
        return parse_raw(
            _raw(_text_reader(spark.read, source), source, paths), source, schema, rules
        )
    read_schema, options = _reader_settings(source, schema)
    frame = spark.read.format(source.format).schema(read_schema).options(**options).load(paths)
    return _with_reader_columns(frame, source, schema)


def raw_files(spark: SparkSession, source: FileSource, files: list[str]) -> DataFrame:
    """Given JSON or CSV files as raw records, as the stream hands a micro-batch over."""
    return _raw(_text_reader(spark.read, source), source, [literal_path(f) for f in files])


def parse_raw(
    raw: DataFrame, source: FileSource, schema: StructType, rules: RecordRules
) -> DataFrame:
    """A raw batch (`read_stream`'s) as the table's columns plus the reader's (Parquet: as is)."""
    if source.format == "json":
        value = F.col(_VALUE)
        kept = raw.where(~is_blank_line(value))
        parse = {k: v for k, v in source.options.items() if k not in TEXT_OPTIONS}
        return json_records(
            kept, value, schema, [F.col(SOURCE_FILE_COLUMN)], parse_options=parse, rules=rules
        )
    if source.format == "csv":
        return csv_records(raw, F.col(_VALUE), schema, source.options, rules)
    return raw


def suspects(files: FileStatuses, rules: RecordRules) -> list[str]:
    """The files that may hold a line past the limit (see `long_lines.is_suspect`)."""
    return [
        name
        for name, found in files.items()
        if is_suspect(name, found[0] if found else None, rules.max_record_bytes)
    ]


def vetted_json(
    spark: SparkSession,
    source: FileSource,
    schema: StructType,
    files: FileStatuses,
    rules: RecordRules,
) -> tuple[DataFrame, list[str]]:
    """JSON files read without ever holding a line past the limit, and the copies made for it.

    `files` maps Hadoop path strings (not URL-encoded) to their size and modification time.
    Files with such lines (`long_lines.scan_long_lines`) are read from copies without them,
    their rows still naming the file they came from, and each long line is one row with its
    reason. Returns the rows and the copies this call made (existing ones are reused).
    """
    limit = rules.max_record_bytes
    line_sep = source.options.get("lineSep")
    doubtful = suspects(files, rules)
    found = scan_long_lines(spark, doubtful, limit, line_sep) if doubtful else {}
    root = copies_root(spark) if found else ""
    copies = {name: copy_location(root, name, *(files.get(name) or (None, None))) for name in found}
    missing = {name: target for name, target in copies.items() if not exists(spark, target)}
    if missing:
        copy_without(spark, {k: as_uri(v) for k, v in missing.items()}, limit, line_sep)
    paths = [literal_path(f) for f in files if f not in found]
    paths += [literal_path(as_uri(target)) for target in copies.values()]
    raw = _raw(_text_reader(spark.read, source), source, paths)
    frame = parse_raw(raw, source, schema, rules)
    if not found:
        return frame, []
    origin = F.col(SOURCE_FILE_COLUMN)
    for name, target in copies.items():
        directory = target.rsplit("/", 2)[-2]
        is_copy = F.col(SOURCE_FILE_COLUMN).contains(f"/{directory}/")
        origin = F.when(is_copy, F.lit(found[name][0].file)).otherwise(origin)
    renamed = frame.withColumn(SOURCE_FILE_COLUMN, origin)
    long = [line for lines_of in found.values() for line in lines_of]
    rows = renamed.unionByName(long_line_rows(spark, renamed, long, limit))
    return rows, list(missing.values())


def _text_reader(
    reader: DataFrameReader | DataStreamReader, source: FileSource
) -> DataFrameReader | DataStreamReader:
    """Spark's text reader with the source's text options: lines (JSON) or whole files (CSV)."""
    options = {k: v for k, v in source.options.items() if k in TEXT_OPTIONS}
    text = reader.format("text").options(**options)
    return text.option("wholetext", "true") if source.format == "csv" else text


def _raw(
    reader: DataFrameReader | DataStreamReader, source: FileSource, paths: str | list[str]
) -> DataFrame:
    """The raw records: each line's (JSON) or file's (CSV, bytes undecoded) text, and its file."""
    frame = reader.load(paths)  # type: ignore[arg-type]
    value = F.col(_VALUE).cast("binary") if source.format == "csv" else F.col(_VALUE)
    return frame.select(value.alias(_VALUE), F.col("_metadata.file_path").alias(SOURCE_FILE_COLUMN))


def _reader_settings(source: FileSource, schema: StructType) -> tuple[StructType, dict[str, str]]:
    options = {**DEFAULT_OPTIONS[source.format], **source.options}
    if not source.has_corrupt_column:
        return schema, options
    options.update({"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN})
    return StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType())]), options


def _with_reader_columns(frame: DataFrame, source: FileSource, schema: StructType) -> DataFrame:
    extra = [F.col(CORRUPT_COLUMN)] if source.has_corrupt_column else []
    return frame.select(
        *schema.fieldNames(), *extra, F.col("_metadata.file_path").alias(SOURCE_FILE_COLUMN)
    )
