"""Reading Kafka with Spark's connector: a stream, or exactly the offset ranges of a batch.

- `read_kafka_stream` opens the topic as a stream with `failOnDataLoss=true`, so offsets that
  retention removed before they were read stop the stream instead of being skipped silently.
  JSON values are parsed with the table schema, PERMISSIVE: a value that does not parse keeps its
  raw text in the corrupt-record column and has null data columns, so it reaches quarantine.
  Every row also carries its Kafka coordinates (`_lh_kafka_*` columns).
- `read_kafka_range` re-reads exactly the offset ranges a batch's ledger entry names (replay). It
  first checks that Kafka still holds them and names the lost ones if not.
- `offset_ranges(batch)` is what a batch covered: topic -> partition -> [first, last] offset of
  its rows, from one small aggregation. The runner records it in the batch's ledger entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType

from ingest.sources.kafka_admin import assert_in_kafka
from ingest.sources.offsets import OffsetRanges, checked_ranges, validate_starting_offsets
from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    json_records,
)
from tables.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from ingest.sources.kafka import KafkaSource
    from tables.record_rules import RecordRules

TOPIC_COLUMN = "_lh_kafka_topic"
PARTITION_COLUMN = "_lh_kafka_partition"
OFFSET_COLUMN = "_lh_kafka_offset"
TIMESTAMP_COLUMN = "_lh_kafka_timestamp"
KEY_COLUMN = "_lh_kafka_key"
#: The Kafka coordinates every row read from Kafka carries, after the data columns.
KAFKA_COLUMNS = (TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN, KEY_COLUMN)
#: Table columns with these names are filled from the record's Kafka coordinates (cast to the
#: column's declared type), not from its value: the mapping of key, topic, partition, offset and
#: timestamp into the table schema.
METADATA_COLUMNS = MappingProxyType(
    {
        "kafka_key": KEY_COLUMN,
        "kafka_topic": TOPIC_COLUMN,
        "kafka_partition": PARTITION_COLUMN,
        "kafka_offset": OFFSET_COLUMN,
        "kafka_timestamp": TIMESTAMP_COLUMN,
    }
)

_RAW_SCHEMA = MappingProxyType({"key": StringType(), "value": StringType()})


def check_schema(source: KafkaSource, schema: StructType) -> None:
    """Raise ConfigError if `schema` cannot hold the source's values.

    `raw` sources land the key and the value as strings: the schema must be exactly
    `key STRING, value STRING` (in either order), plus any of the `METADATA_COLUMNS`.
    """
    if source.value_format == "raw":
        found = {f.name: f.dataType for f in schema.fields if f.name not in METADATA_COLUMNS}
        if found != _RAW_SCHEMA:
            raise ConfigError(
                "a Kafka source with value_format 'raw' needs the schema "
                f"'key STRING, value STRING', not {schema.simpleString()!r}"
            )


def read_kafka_stream(
    spark: SparkSession,
    source: KafkaSource,
    schema: StructType,
    *,
    starting_offsets_json: str | None = None,
) -> DataFrame:
    """Open the source as a stream of raw Kafka records (`kafka_rows` parses each batch).

    `starting_offsets_json` overrides `source.starting_offsets` (e.g. `next_offsets` of the
    ledger). Like any starting offsets, it applies only when the checkpoint is new: a checkpoint
    that exists resumes where it stopped.
    """
    check_schema(source, schema)
    starting = starting_offsets_json or source.starting_offsets
    validate_starting_offsets(starting)
    reader = spark.readStream.format("kafka").options(**source.connector_options())
    reader = reader.option("startingOffsets", starting)
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_trigger))
    return reader.load()


def read_kafka_range(
    spark: SparkSession,
    source: KafkaSource,
    schema: StructType,
    ranges: OffsetRanges,
    rules: RecordRules | None = None,
) -> DataFrame:
    """Read exactly the given offset ranges (both ends inclusive) as one batch.

    Raises TerminalError, before anything is read, if Kafka no longer holds some of the offsets
    (retention or a record deletion moved the partition's earliest offset past them, or the
    topic is gone). `failOnDataLoss` stays on, so offsets removed after this check fail the
    read rather than being skipped.
    """
    check_schema(source, schema)
    wanted = checked_ranges(ranges)
    if not wanted:
        raise ConfigError("no offset ranges to read")
    assert_in_kafka(spark, source, wanted)
    options = source.connector_options()
    options.pop("subscribe", None)
    options.pop("subscribePattern", None)
    assign = {topic: sorted(int(p) for p in parts) for topic, parts in wanted.items()}
    starting = {t: {p: bounds[0] for p, bounds in parts.items()} for t, parts in wanted.items()}
    ending = {t: {p: bounds[1] + 1 for p, bounds in parts.items()} for t, parts in wanted.items()}
    frame = (
        spark.read.format("kafka")
        .options(**options)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )
    return kafka_rows(frame, source, schema, rules)


def kafka_rows(
    frame: DataFrame, source: KafkaSource, schema: StructType, rules: RecordRules | None = None
) -> DataFrame:
    """Kafka's key/value records as the table's columns, then the Kafka coordinates."""
    coordinates = [
        F.col("topic").alias(TOPIC_COLUMN),
        F.col("partition").alias(PARTITION_COLUMN),
        F.col("offset").alias(OFFSET_COLUMN),
        F.col("timestamp").alias(TIMESTAMP_COLUMN),
        F.col("key").cast("string").alias(KEY_COLUMN),
    ]
    if source.value_format == "raw":
        framed = frame.select("key", "value", *coordinates)
        return framed.select(*_data_columns(schema, F.col), *KAFKA_COLUMNS)
    # The value's bytes as a string without decoding: bytes that are not UTF-8 stay exact.
    value = F.col("value").cast("string")
    values = StructType([f for f in schema.fields if f.name not in METADATA_COLUMNS])
    parsed = json_records(frame, value, values, coordinates, detect_files=False, rules=rules)
    reader = [CORRUPT_COLUMN, RECORD_COLUMN, FAULT_COLUMN, RESCUE_INPUT_COLUMN]
    return parsed.select(*_data_columns(schema, F.col), *reader, *KAFKA_COLUMNS)


def _data_columns(schema: StructType, from_value: Callable[[str], Column]) -> list[Column]:
    """The table's columns: metadata columns from the coordinates, the others from the value."""
    return [
        F.col(METADATA_COLUMNS[f.name]).cast(f.dataType).alias(f.name)
        if f.name in METADATA_COLUMNS
        else from_value(f.name).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]


def offset_ranges(batch: DataFrame) -> OffsetRanges:
    """The offsets a batch of Kafka rows covers: topic -> partition -> [first, last].

    One aggregation over the Kafka columns. Partitions without rows in the batch are absent.
    """
    rows = (
        batch.groupBy(TOPIC_COLUMN, PARTITION_COLUMN)
        .agg(F.min(OFFSET_COLUMN).alias("first"), F.max(OFFSET_COLUMN).alias("last"))
        .collect()
    )
    ranges: OffsetRanges = {}
    for row in sorted(rows, key=lambda r: (r[TOPIC_COLUMN], r[PARTITION_COLUMN])):
        ranges.setdefault(row[TOPIC_COLUMN], {})[str(row[PARTITION_COLUMN])] = [
            int(row["first"]),
            int(row["last"]),
        ]
    return ranges
