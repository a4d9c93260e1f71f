"""Malformed input: every class of bad row lands in quarantine with its reason, none is lost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
SCHEMA = "event_id STRING NOT NULL, kind STRING NOT NULL, amount DOUBLE, seen TIMESTAMP"

GOOD_JSON = [
    '{"event_id": "g1", "kind": "click", "amount": 1.5, "seen": "2026-11-01 10:00:00"}',
    '{"event_id": "g2", "kind": "view", "amount": 2, "seen": "2026-11-01 10:00:01"}',
    '{"event_id": "g2", "kind": "view", "amount": 2, "seen": "2026-11-01 10:00:01"}',
]
#: One line per class: the line, a text its quarantined raw record contains, the reason's start.
BAD_JSON = [
    ('{"event_id": "b1", "kind": "click", "amount": 3', '"b1"', "malformed JSON: not valid JSON"),
    ("[1, 2, 3]", "[1, 2, 3]", "malformed JSON: the record is an array or a bare value"),
    ('"just a string"', "just a string", "malformed JSON: the record is an array or a bare"),
    (
        '{"event_id": "b4", "kind": "click", "amount": "3 euros"}',
        '"b4"',
        "wrong type: column amount value '3 euros' is not a DOUBLE",
    ),
    (
        '{"event_id": "b5", "kind": "click", "seen": "yesterday"}',
        '"b5"',
        "wrong type: column seen value 'yesterday' is not a TIMESTAMP",
    ),
    (
        '{"event_id": "b6", "kind": "click", "amount": 1e400}',
        '"b6"',
        "out of range: column amount is not a finite number",
    ),
    ('{"kind": "fetch", "amount": 1}', "fetch", "missing record key: event_id is null"),
    ('{"event_id": "  ", "kind": "click"}', '"  "', "blank record key: event_id is empty"),
    ('{"event_id": "b9", "amount": 1}', '"b9"', "missing required field: kind is null"),
    (
        '{"event_id": "g1", "kind": "view", "amount": 9.5, "seen": "2026-11-01 10:00:00"}',
        "9.5",
        "conflicting duplicate: record key event_id=g1 appears",
    ),
]
GOOD_CSV = ["event_id,kind,amount,seen", "c1,click,1.0,2026-11-01 10:00:00", '"c,2",view,2,']
BAD_CSV = {
    "c3,click,3.0,2026-11-01 10:00:00,surplus": "malformed CSV: 5 fields, the header has 4",
    "c4,click": "malformed CSV: 2 fields, the header has 4",
    "c5,click,abc,2026-11-01 10:00:00": "wrong type: column amount value 'abc' is not a DOUBLE",
}


def run_landing(
    spark: SparkSession, spec: TableSpec, tmp_path: Path, fmt: str, lines: list[str]
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / f"batch.{fmt}").write_text("\n".join(lines) + "\n")
    job = PipelineSpec(
        name="malformed",
        table=spec.name,
        app_id="malformed",
        source=FileSource(str(landing), fmt),  # type: ignore[arg-type]
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    run_pipeline(spark, job, spec)


def quarantined(spark: SparkSession, spec: TableSpec) -> dict[str, str]:
    rows = spark.table(spec.quarantine_name).select("_lh_raw", "_lh_reason").collect()
    return {r["_lh_raw"]: r["_lh_reason"] for r in rows}


def reason_for(found: dict[str, str], marker: str) -> str:
    [reason] = [reason for raw, reason in found.items() if marker in raw]
    return reason


def test_every_class_of_bad_json_line_is_quarantined_with_its_reason(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA)

    run_landing(spark, spec, tmp_path, "json", [*GOOD_JSON, *(line for line, _, _ in BAD_JSON)])

    found = quarantined(spark, spec)
    for line, marker, reason in BAD_JSON:
        assert reason_for(found, marker).startswith(reason), line
    assert len(found) == len(BAD_JSON)
    landed = sorted(r[0] for r in spark.table(spec.name).select("event_id").collect())
    assert landed == ["g1", "g2"]
    [entry] = read_ledger(spark, spec.name)
    assert (entry.meta.rows_read, entry.rows_inserted, entry.meta.rows_quarantined) == (13, 2, 10)
    assert entry.rows_duplicate_in_batch == 1
    assert entry.meta.rows_read == (
        entry.rows_inserted + entry.meta.rows_quarantined + entry.rows_duplicate_in_batch
    )


def test_csv_rows_with_too_many_or_too_few_fields_are_not_truncated_silently(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA)

    run_landing(spark, spec, tmp_path, "csv", [*GOOD_CSV, *BAD_CSV])

    found = quarantined(spark, spec)
    assert set(found) == set(BAD_CSV)
    for raw, reason in BAD_CSV.items():
        assert found[raw].startswith(reason), raw
    landed = sorted(r[0] for r in spark.table(spec.name).select("event_id").collect())
    assert landed == ["c,2", "c1"]
    [entry] = read_ledger(spark, spec.name)
    assert (entry.meta.rows_read, entry.rows_inserted, entry.meta.rows_quarantined) == (5, 2, 3)
