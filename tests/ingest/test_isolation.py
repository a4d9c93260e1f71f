"""One record cannot stop a pipeline: a batch that crashed its reader is narrowed, then committed.

The crash is a fault point (`LAKEHOUSE_FAULT_RECORD=worker`): a Python UDF in the reader ends
its worker on a record holding the marker, as a crash in a library would. The first run fails
in one line; the next narrows the batch (files, then record hashes), quarantines that record
with `crashed the reader: ...` and commits the rest under the same batch id, each other record
once. The narrowing's decisions are tested without Spark. The driver JVM's own crash needs a
process of its own: tests/ingest/test_isolation_process.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.admin.replay import ReplayOptions, plan_replay, replay_batch
from ingest.config import PipelineSpec
from ingest.isolation import (
    Culprit,
    IsolationState,
    Piece,
    after_crash,
    is_interrupted,
    recorded_culprits,
    split,
)
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from ingest.sources.long_lines import recorded_form
from tables.delta.history import read_ledger
from tables.delta.writer import TableWriter
from tables.errors import ReaderCrashedError
from tables.faults import CRASH_MARKER, RECORD_CRASH_ENV
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def test_a_batch_is_interrupted_when_begun_and_neither_checkpointed_nor_committed() -> None:
    assert is_interrupted(last_offsets=3, last_commit=2, committed=None, batch_base=0)
    assert is_interrupted(last_offsets=3, last_commit=2, committed=2, batch_base=0)
    assert not is_interrupted(last_offsets=3, last_commit=3, committed=3, batch_base=0)
    assert not is_interrupted(last_offsets=3, last_commit=2, committed=3, batch_base=0)
    assert not is_interrupted(last_offsets=3, last_commit=2, committed=13, batch_base=10)
    assert is_interrupted(last_offsets=3, last_commit=2, committed=12, batch_base=10)
    assert is_interrupted(last_offsets=None, last_commit=-1, committed=None, batch_base=0) is False


def test_a_crashed_piece_splits_by_files_then_by_hash_until_one_record_is_left() -> None:
    whole = Piece()
    halves = split(whole, ["a", "b", "c"], records=9)
    assert halves == (Piece(files=("a",)), Piece(files=("b", "c")))
    one_file = split(Piece(files=("a",)), ["a"], records=5)
    assert one_file is not None
    low, high = one_file
    assert (low.lo, low.hi, high.lo, high.hi) == (-(2**63), 0, 0, 2**63)
    assert split(Piece(files=("a",)), ["a"], records=1) is None
    assert split(Piece(files=("a",), lo=5, hi=6), ["a"], records=2) is None

    state = IsolationState(batch_id=4, pending=(), trying=Piece(files=("a",)))
    found = after_crash(state, ["a"], records=1, hashes=[42], cause="boom")
    assert found.culprits == (Culprit("a", 42, "boom"),)
    assert found.is_done
    csv = after_crash(state, ["a"], records=1, hashes=[], cause="boom")
    assert csv.culprits == (Culprit("a", None, "boom"),)
    assert IsolationState.from_json(json.loads(json.dumps(found.as_json()))) == found
    assert recorded_form("file:///tmp/a%20b.json") == "file:/tmp/a%20b.json"
    assert recorded_form("s3a://bucket/a.json") == "s3a://bucket/a.json"


def drop(landing: Path, name: str, lines: list[str]) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / name).write_text("\n".join(lines) + "\n")


def test_a_record_that_crashes_the_reader_is_quarantined_and_the_rest_lands_exactly_once(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    landing = tmp_path / "landing"
    good = [json.dumps({"event_id": f"e{i}", "amount": float(i)}) for i in range(40)]
    poison = json.dumps({"event_id": "poison", "user_id": CRASH_MARKER})
    drop(landing, "a.json", good[:20])
    drop(landing, "b.json", [*good[20:30], poison, *good[30:]])
    drop(landing, "c.json", ['{"event_id": "c1"}'])
    job = PipelineSpec(
        name="poison",
        table=spec.name,
        app_id="poison",
        source=FileSource(str(landing), "json"),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    monkeypatch.setenv(RECORD_CRASH_ENV, "worker")

    with pytest.raises(ReaderCrashedError) as crashed:
        run_pipeline(spark, job, spec)
    report = run_pipeline(spark, job, spec)
    again = run_pipeline(spark, job, spec)

    assert str(crashed.value).startswith("pipeline poison, batch 0: the Python worker exited")
    assert crashed.value.batch_id == 0
    assert len(crashed.value.files) == 3
    assert [
        (r.batch_id, r.rows_read, r.rows_inserted, r.rows_quarantined) for r in report.results
    ] == [(0, 42, 41, 1)]
    assert again.results == []
    ids = [r["event_id"] for r in spark.table(spec.name).collect()]
    assert sorted(ids) == sorted([f"e{i}" for i in range(40)] + ["c1"])
    (row,) = spark.table(spec.quarantine_name).collect()
    assert row["_lh_reason"] == "crashed the reader: the Python worker exited unexpectedly"
    assert row["_lh_raw"] == poison
    assert row["_lh_source"].endswith("/b.json")
    (entry,) = read_ledger(spark, spec.name)
    (culprit,) = recorded_culprits(entry.meta.source)
    assert culprit.file is not None
    assert culprit.file.endswith("/b.json")
    assert not (tmp_path / "checkpoint" / "lakehouse" / "isolation.json").exists()

    (plan,) = plan_replay(spark, spec, "poison", 0, 0, job.source)
    replayed = replay_batch(
        TableWriter(spark, spec, plan.entry.meta.app_id), plan, ReplayOptions(dry_run=True)
    )

    assert (replayed.rows_source, replayed.rows_rejected) == (41, 1)
