"""The landing-directory stream into the batch commit, with real Structured Streaming."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.config import PipelineSpec
from ingest.observe.observer import RunObserver
from ingest.runner import RunOptions, run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batch
from tables.engine.jvm import code_compilations
from tables.errors import CheckpointLostError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def drop_json(landing: Path, name: str, rows: list[dict[str, object]], extra: str = "") -> None:
    landing.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(r) for r in rows) + "\n" + extra
    (landing / name).write_text(text)


def pipeline(
    tmp_path: Path, spec: TableSpec, app_id: str = "landing", files: int = 1
) -> PipelineSpec:
    return PipelineSpec(
        name=app_id,
        table=spec.name,
        app_id=app_id,
        source=FileSource(str(tmp_path / "landing"), "json", max_files_per_trigger=files),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoints" / app_id),
    )


def rows(start: int, count: int) -> list[dict[str, object]]:
    return [
        {"event_id": f"e{i}", "user_id": "u", "amount": float(i)}
        for i in range(start, start + count)
    ]


def test_available_now_lands_every_file_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    drop_json(landing, "a.json", rows(0, 10) + rows(0, 3))
    drop_json(landing, "b.json", rows(10, 10), extra='{"event_id": "broken", "amount": \n')
    job = pipeline(tmp_path, spec)

    report = run_pipeline(spark, job, spec)
    again = run_pipeline(spark, job, spec)

    assert [r.status for r in report.results] == ["committed", "committed"]
    assert report.rows_inserted == 20
    assert report.rows_quarantined == 1
    assert again.results == []
    assert spark.table(spec.name).count() == 20
    # The state rebuild the last batch started for a next one is closed with the run.
    assert [t for t in threading.enumerate() if t.name == f"lakehouse-state-{spec.name}"] == []
    ledger = read_ledger(spark, spec.name)
    assert sorted(len(e.meta.source["files"]) for e in ledger) == [1, 1]
    assert {e.meta.source["format"] for e in ledger} == {"json"}


def test_lost_checkpoint_is_detected_before_the_stream_starts(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    drop_json(tmp_path / "landing", "a.json", rows(0, 5))
    job = pipeline(tmp_path, spec)
    run_pipeline(spark, job, spec)
    shutil.rmtree(job.checkpoint)

    with pytest.raises(CheckpointLostError, match=r"holds batches up to 0 .* restart at batch 0"):
        run_pipeline(spark, job, spec)

    fresh = pipeline(tmp_path, spec, app_id="landing-v2")
    report = run_pipeline(spark, fresh, spec)
    assert report.count("committed") == 1
    assert committed_batch(spark, spec.name, "landing-v2") == 0


def test_two_streams_in_one_session_commit_concurrently(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    jobs = []
    for app_id, start in (("left", 0), ("right", 1000)):
        base = tmp_path / app_id
        for n in range(3):
            drop_json(base / "landing", f"{n}.json", rows(start + n * 10, 10))
        jobs.append(pipeline(base, spec, app_id=app_id))
    reports: dict[str, int] = {}
    errors: list[BaseException] = []

    def run(job: PipelineSpec) -> None:
        try:
            reports[job.app_id] = run_pipeline(spark, job, spec).count("committed")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors, [str(e)[:600] for e in errors]
    assert reports == {"left": 3, "right": 3}
    assert committed_batch(spark, spec.name, "left") == 2
    assert committed_batch(spark, spec.name, "right") == 2
    table = spark.table(spec.name)
    assert table.count() == 60
    ledger = read_ledger(spark, spec.name)
    assert len(ledger) == 6
    for entry in ledger:
        assert all(f"/{entry.meta.app_id}/landing/" in f for f in entry.meta.source["files"])
        landed = table.where(
            (table["_lh_app_id"] == entry.meta.app_id)
            & (table["_lh_batch_id"] == entry.meta.batch_id)
        )
        assert landed.count() == entry.rows_inserted == 10


def test_csv_and_parquet_landing_directories(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    csv_dir = tmp_path / "csv" / "landing"
    csv_dir.mkdir(parents=True)
    (csv_dir / "a.csv").write_text(
        "event_id,user_id,amount\ne1,u1,1.5\ne2,u2,not-a-number\ne3,u3,3\n"
    )
    parquet_dir = tmp_path / "parquet" / "landing"
    spark.createDataFrame(
        [("p1", "u", 1.0), ("p2", "u", 2.0)], "event_id string, user_id string, amount double"
    ).write.parquet(str(parquet_dir))

    for fmt in ("csv", "parquet"):
        job = PipelineSpec(
            name=fmt,
            table=spec.name,
            app_id=fmt,
            source=FileSource(str(tmp_path / fmt / "landing"), fmt),  # type: ignore[arg-type]
            trigger="available-now",
            checkpoint=str(tmp_path / fmt / "checkpoint"),
        )
        run_pipeline(spark, job, spec)

    landed = {r["event_id"] for r in spark.table(spec.name).collect()}
    assert landed == {"e1", "e3", "p1", "p2"}
    [bad] = spark.table(spec.quarantine_name).collect()
    assert bad["_lh_raw"] == "e2,u2,not-a-number"
    assert bad["_lh_reason"] == "wrong type: column amount value 'not-a-number' is not a DOUBLE"


def test_processing_time_trigger_runs_until_stopped(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    drop_json(landing, "a.json", rows(0, 5))
    job = pipeline(tmp_path, spec, app_id="continuous")
    seen = threading.Event()
    reports = []

    class Watch(RunObserver):
        def audited(self, audit: object) -> None:
            if spark.table(spec.name).count() >= 10:
                seen.set()

    def run() -> None:
        reports.append(run_pipeline(spark, job, spec, RunOptions(trigger="1 second"), Watch()))

    thread = threading.Thread(target=run)
    thread.start()
    drop_json(landing, "b.json", rows(5, 5))
    assert seen.wait(timeout=120), "the second file was not picked up"
    # Stop between batches, as an operator's stop would land most of the time: a stop during a
    # batch interrupts it, and the run then reports the interrupted batch as failed.
    [query] = [q for q in spark.streams.active if q.name == "lakehouse_continuous"]
    deadline = time.monotonic() + 60
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
    thread.join(timeout=60)

    assert not thread.is_alive()
    assert reports[0].rows_inserted == 10


@pytest.mark.usefixtures("generated_code")
def test_a_steady_stream_batch_reuses_its_compiled_code(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    """Spark keeps 100 compiled classes by default and a batch has more plan shapes than that:
    every batch compiled its code again (about 58 classes, docs/benchmarks.md). The session's
    cache holds them, so a third run of the same pipeline compiles almost nothing."""
    spec = make_table()
    job = pipeline(tmp_path, spec)
    compiled = []
    for n in range(3):
        drop_json(tmp_path / "landing", f"{n}.json", rows(n * 10, 10))
        before = code_compilations(spark)
        [result] = run_pipeline(spark, job, spec).results
        assert result.status == "committed"
        compiled.append(code_compilations(spark) - before)
    assert compiled[0] > 10, compiled  # the code was generated: a cold cache compiled it
    assert compiled[-1] <= 10, compiled
