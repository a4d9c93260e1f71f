"""A landing directory that stays small: files archived or deleted once their batch is done.

A month-long stream lists its landing directory every trigger (Spark's file source), so one
that keeps every file lists more each day; `clean_source` has Spark move a read file under
`archive_dir`, or delete it, after the batch that read it is checkpointed. Archived files stay
replayable: a replay looks for a file there when it is gone from the landing directory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.admin.replay import assert_sources_present, plan_replay, replay_batch
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from ingest.sources.files import CleanSource, archived_location
from tables.delta.history import read_ledger
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def name(n: int) -> str:
    """File `n`'s name; the third's holds a space, `%20` and `#`, which a URI would read otherwise
    (the ledger keeps it URL-encoded: a replay must find it in place, not decode it twice)."""
    return "2 a%20b#c.json" if n == 2 else f"{n}.json"


def drop(landing: Path, names: range) -> None:
    """JSON files of 5 events each, older files first."""
    landing.mkdir(exist_ok=True)
    for n in names:
        rows = [{"event_id": f"e{n}-{i}", "user_id": "u", "amount": float(i)} for i in range(5)]
        (landing / name(n)).write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(landing / name(n), (1_700_000_000 + n, 1_700_000_000 + n))


def pipeline(
    tmp_path: Path, spec: TableSpec, clean: CleanSource, archive: Path | None
) -> PipelineSpec:
    source = FileSource(
        str(tmp_path / "landing"),
        "json",
        max_files_per_trigger=1,
        clean_source=clean,
        archive_dir=None if archive is None else str(archive),
    )
    return PipelineSpec(
        name="land",
        table=spec.name,
        app_id="land",
        source=source,
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )


def settled(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Whether `check` holds within `seconds`: Spark cleans files in a thread of its own."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def batches(spark: SparkSession, spec: TableSpec) -> list[int]:
    return sorted(e.meta.batch_id for e in read_ledger(spark, spec.name) if e.meta.kind == "batch")


def test_archived_files_leave_the_landing_directory_and_replay_from_the_archive(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing, archive = tmp_path / "landing", tmp_path / "archive"
    drop(landing, range(3))
    job = pipeline(tmp_path, spec, "archive", archive)

    run_pipeline(spark, job, spec)

    assert batches(spark, spec) == [0, 1, 2]
    assert spark.table(spec.name).count() == 15
    # Every batch Spark has checkpointed and started past has its file moved, path kept.
    moved = [archived_location(str(archive), str(landing / name(n))) for n in range(2)]
    assert settled(lambda: all(Path(m).exists() for m in moved)), sorted(archive.rglob("*"))
    assert sorted(p.name for p in landing.iterdir()) == [name(2)]  # the last batch's: below

    # A replay finds the files, archived or in place: nothing is missing, deleted rows come back.
    spark.sql(f"DELETE FROM {spec.name} WHERE event_id IN ('e0-3', 'e2-1')")
    plans = plan_replay(spark, spec, "land", 0, 2, job.source)
    assert_sources_present(spark, plans)
    replayed = [replay_batch(TableWriter(spark, spec, "land"), plan) for plan in plans]
    assert [r.rows_restored for r in replayed] == [1, 0, 1]
    assert spark.table(spec.name).count() == 15

    # A file dropped later is the only one the next run reads.
    drop(landing, range(3, 4))
    run_pipeline(spark, job, spec)
    assert batches(spark, spec) == [0, 1, 2, 3]
    assert spark.table(spec.name).count() == 20


def test_deleted_files_are_gone_and_read_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    drop(landing, range(3))
    job = pipeline(tmp_path, spec, "delete", None)

    run_pipeline(spark, job, spec)

    assert batches(spark, spec) == [0, 1, 2]
    assert settled(lambda: sorted(p.name for p in landing.iterdir()) == [name(2)])
    plans = plan_replay(spark, spec, "land", 0, 2, job.source)
    assert [p.source.missing(spark, p.recorded) for p in plans] == [
        [f"file:{landing}/0.json"],
        [f"file:{landing}/1.json"],
        [],
    ]
