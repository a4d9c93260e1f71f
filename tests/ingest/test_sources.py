"""Which source re-reads a recorded batch, decided from its ledger record without Spark.

The configured source wins when it is of the recorded kind (it carries reader options and Kafka
credentials the ledger never holds); otherwise the source is rebuilt from the record; a record
that names no files or offsets has no source.
"""

from __future__ import annotations

from typing import Any

import pytest

from ingest.sources import FileSource, KafkaSource, recorded_source

FILES_RECORD = {"kind": "files", "format": "csv", "path": "/landing", "files": ["/landing/a.csv"]}
KAFKA_RECORD = {
    "kind": "kafka",
    "bootstrap_servers": "broker:9092",
    "topic": "clicks",
    "value_format": "json",
    "options": {"sasl.jaas.config": "***"},
    "offsets": {"clicks": {"0": [0, 9]}},
}
CONFIGURED_FILES = FileSource("/landing", "csv", options={"sep": ";"})
CONFIGURED_KAFKA = KafkaSource("broker:9092", topic="clicks", options={"sasl.jaas.config": "x"})


def test_the_configured_source_of_the_recorded_kind_reads_again() -> None:
    assert recorded_source(FILES_RECORD, CONFIGURED_FILES) is CONFIGURED_FILES
    assert recorded_source(KAFKA_RECORD, CONFIGURED_KAFKA) is CONFIGURED_KAFKA


def test_without_a_configured_source_of_its_kind_the_record_is_rebuilt() -> None:
    assert recorded_source(FILES_RECORD, CONFIGURED_KAFKA) == FileSource("/landing", "csv")
    assert recorded_source(KAFKA_RECORD, None) == KafkaSource("broker:9092", topic="clicks")
    assert recorded_source(KAFKA_RECORD, CONFIGURED_FILES) == KafkaSource(
        "broker:9092", topic="clicks"
    )


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"kind": "files", "format": "json", "path": "/landing"},
        {"kind": "kafka", "bootstrap_servers": "broker:9092", "topic": "clicks"},
        {"note": "backfill"},
    ],
)
def test_a_record_without_files_or_offsets_has_no_source(record: dict[str, Any]) -> None:
    assert recorded_source(record, CONFIGURED_FILES) is None


def test_each_source_says_how_its_raw_text_was_read() -> None:
    assert (CONFIGURED_FILES.raw_format, dict(CONFIGURED_FILES.reader_options)) == (
        "csv",
        {"sep": ";"},
    )
    assert (CONFIGURED_KAFKA.raw_format, dict(CONFIGURED_KAFKA.reader_options)) == ("json", {})
    raw = KafkaSource("broker:9092", topic="clicks", value_format="raw")
    assert raw.raw_format is None
    assert CONFIGURED_KAFKA.needs_kafka
    assert not CONFIGURED_FILES.needs_kafka
    assert (CONFIGURED_FILES.location, CONFIGURED_KAFKA.location) == ("/landing", None)
