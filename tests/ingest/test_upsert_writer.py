"""One writer at a time on an upsert table, whatever its app id (issue 37's concurrency gap).

A run of an upsert table holds a lock beside the table's data for as long as it holds its
checkpoint; a run of another app id (another config, another process) meets it and is refused
in one line naming the holder. An insert table takes no such lock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from ingest.upsert_writer import UpsertWriterInUseError, hold_upsert_writer
from tables.spec import TableSpec

pytestmark = pytest.mark.evolution

MakeTable = Callable[..., TableSpec]
SCHEMA = "id STRING NOT NULL, seq BIGINT, name STRING"


def pipeline(spec: TableSpec, tmp_path: Path, app_id: str) -> PipelineSpec:
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    lines = [json.dumps({"id": f"k{i}", "seq": i, "name": "n"}) for i in range(3)]
    (landing / "0.json").write_text("\n".join(lines) + "\n")
    return PipelineSpec(
        name=app_id,
        table=spec.name,
        app_id=app_id,
        source=FileSource(str(landing), "json"),
        trigger="available-now",
        checkpoint=str(tmp_path / f"checkpoint-{app_id}"),
    )


def test_a_second_app_is_refused_while_one_writes_an_upsert_table(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",), merge="upsert", sequence_by="seq")
    job = pipeline(spec, tmp_path, "second")

    with (
        hold_upsert_writer(spark, spec, "first"),
        pytest.raises(UpsertWriterInUseError) as caught,
    ):
        run_pipeline(spark, job, spec)
    assert caught.value.holder.startswith("app id 'first', pid ")
    assert "one writer at a time" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert spark.table(spec.name).count() == 0

    report = run_pipeline(spark, job, spec)  # released: the run goes on
    assert [r.status for r in report.results] == ["committed"]
    assert spark.table(spec.name).count() == 3


def test_an_insert_table_takes_no_writer_lock(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(schema=SCHEMA, keys=("id",))
    with hold_upsert_writer(spark, spec, "first"):
        report = run_pipeline(spark, pipeline(spec, tmp_path, "second"), spec)
    assert [r.status for r in report.results] == ["committed"]
