"""A generated corpus through the real stream: every record gets exactly its expected fate.

10,000+ JSON lines in 27 classes and 300+ CSV records in 16 classes (tests/support/corpus.py)
are landed as files and ingested by an available-now pipeline run. Each record is then found in
exactly one place: in the table with its values (and exact `_lh_rescued`), in quarantine with
its reason and exact raw text or bytes, or counted as a copy; the ledger's counts agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.spec import TableSpec
from tests.support.corpus import (
    COLUMNS,
    JSON_CLASSES,
    SCHEMA,
    UNDECODABLE,
    Record,
    csv_corpus,
    json_corpus,
    write_gzip_named_json,
    write_json,
)

MakeTable = Callable[..., TableSpec]


def ingest(spark: SparkSession, spec: TableSpec, landing: Path, fmt: str, tmp: Path) -> None:
    job = PipelineSpec(
        name=f"corpus-{fmt}",
        table=spec.name,
        app_id=f"corpus-{fmt}",
        source=FileSource(str(landing), fmt),  # type: ignore[arg-type]
        trigger="available-now",
        checkpoint=str(tmp / f"checkpoint-{fmt}"),
    )
    run_pipeline(spark, job, spec)


def assert_fates(spark: SparkSession, spec: TableSpec, records: list[Record]) -> dict[str, int]:
    """Check each record's fate against the table, the quarantine and the ledger; count fates."""
    rows = spark.table(spec.name).select(*COLUMNS, "_lh_rescued").collect()
    expected_rows = [r for r in records if r.fate in ("landed", "rescued")]
    # Counted per key, not collected into a dict: a row that landed twice must show.
    times_landed = Counter(r["event_id"] for r in rows)
    assert times_landed == Counter(r.event_id for r in expected_rows)
    assert set(times_landed.values()) <= {1}
    landed = {r["event_id"]: r.asDict() for r in rows}
    for record in expected_rows:
        row = landed[record.event_id]
        got = {c: row[c] for c in COLUMNS}
        want = {c: record.values.get(c) for c in COLUMNS}
        assert got == want, (record.kind, record.raw)
        assert row["_lh_rescued"] == record.rescued, (record.kind, record.raw)

    quarantine = spark.table(spec.quarantine_name).collect()
    found: Counter[tuple[bytes | None, str]] = Counter()
    reasons: dict[bytes | None, list[str]] = {}
    for row in quarantine:
        raw = row["_lh_raw_bytes"] if row["_lh_raw"] is None else row["_lh_raw"].encode()
        raw = bytes(raw) if raw is not None else None
        reasons.setdefault(raw, []).append(row["_lh_reason"])
        found[(raw, "")] += 1
    bad = [r for r in records if r.fate == "quarantined"]
    for record in bad:
        got_reasons = reasons.get(record.raw)
        assert got_reasons, (record.kind, record.raw)
        assert any(g.startswith(record.reason) for g in got_reasons), (record.kind, got_reasons)
        if record.kind.endswith("invalid_utf8"):
            assert all(g.startswith("invalid UTF-8") for g in got_reasons)
    assert Counter(r.raw for r in bad) == Counter(
        {raw: n for (raw, _), n in found.items() if raw is not None}
    )

    copies = sum(r.fate == "copy" for r in records)
    [entry] = [e for e in read_ledger(spark, spec.name) if e.meta.kind == "batch"]
    assert entry.rows_inserted == len(expected_rows)
    assert entry.rows_duplicate_in_batch == copies
    assert entry.meta.rows_quarantined == len(quarantine)
    assert entry.meta.rows_read == (
        entry.rows_inserted
        + entry.rows_already_present
        + entry.rows_duplicate_in_batch
        + entry.meta.rows_quarantined
    )
    return dict(Counter(r.fate for r in records))


def test_json_corpus_every_line_gets_its_fate(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA)
    records = json_corpus(10_000)
    landing = tmp_path / "json"
    write_json(records, landing)
    disguised = write_gzip_named_json(landing)

    ingest(spark, spec, landing, "json", tmp_path)

    assert len({r.kind for r in records}) == len(JSON_CLASSES) >= 20
    assert len(records) >= 10_000
    fates = assert_fates(spark, spec, records)
    file_rows = (
        spark.table(spec.quarantine_name)
        .where("_lh_raw IS NULL AND _lh_raw_bytes IS NULL")
        .collect()
    )
    assert [
        (r["_lh_source"].endswith(disguised.name), r["_lh_reason"][: len(UNDECODABLE)])
        for r in file_rows
    ] == [(True, UNDECODABLE)]
    [entry] = read_ledger(spark, spec.name)
    assert entry.meta.rows_read == len(records) - fates["blank"] + 1
    print("json fates", fates)


def test_csv_corpus_every_record_gets_its_fate(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA)
    files = csv_corpus(rows_per_file=50)
    landing = tmp_path / "csv"
    landing.mkdir()
    for file in files:
        (landing / file.name).write_bytes(file.data)
    records = [r for f in files for r in f.records]

    ingest(spark, spec, landing, "csv", tmp_path)

    assert len(records) >= 300
    assert len({r.kind for r in records}) >= 10
    fates: dict[str, Any] = assert_fates(spark, spec, records)
    print("csv fates", fates)


def test_a_record_landed_twice_fails_the_fate_check(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table(schema=SCHEMA)
    row = "('a', 0, current_timestamp(), 'j1', 'click', NULL, NULL, NULL, NULL)"
    spark.sql(f"INSERT INTO {spec.name} VALUES {row}, {row}")
    record = Record(b"", "plain", "landed", "j1", {"event_id": "j1", "kind": "click"})

    with pytest.raises(AssertionError):
        assert_fates(spark, spec, [record])
