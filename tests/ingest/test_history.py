"""SCD type 2 (`history = "scd2"`): every version kept, each valid until the next, exactly once.

Every scenario is checked against `expected_history`, a fold of the same records written
without Spark: per key, every version and delete in sequence order (at one sequence value a
delete wins, then the version that came first); a version starts a row unless the event before
it is a version with the same tracked columns; a row ends where the next row or a delete starts.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from ingest.admin.replay import ReplayOptions, ReplayResult, plan_replay, replay_batch
from ingest.admin.verdict import is_reconciled
from ingest.admin.verify import verify_table
from ingest.commit import commit_batch
from ingest.commit.batch_result import BatchResult
from ingest.commit.options import CommitOptions
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import find_ledger_entry, read_ledger
from tables.delta.writer import TableWriter
from tables.errors import ConfigError, InjectedFaultError
from tables.spec import TableSpec
from tests.support.retries import commit_through_faults

pytestmark = [pytest.mark.downstream, pytest.mark.evolution]

MakeTable = Callable[..., TableSpec]
SCHEMA = "id string, name string, seq bigint, op string, note string"
Record = tuple[str, str, int, str, str]
#: (valid_from, valid_to, is_current, name, seq, op, note) per row of a key.
Row = tuple[int, int | None, bool, str, int, str, str]


def history_table(make_table: MakeTable, **kwargs: object) -> TableSpec:
    options: dict[str, object] = {
        "merge": "upsert",
        "sequence_by": "seq",
        "delete_when": "op = 'd'",
        "history": "scd2",
        "except_columns": ("op", "note"),
    }
    return make_table(schema=SCHEMA, keys=("id",), **{**options, **kwargs})


def records(spark: SparkSession, rows: Iterable[Record]) -> DataFrame:
    return spark.createDataFrame(list(rows), SCHEMA)


def expected_history(
    batches: Iterable[Iterable[Record]], tracked: Sequence[int] = (1,)
) -> dict[str, list[Row]]:
    """Each key's rows computed without Spark from every event of every batch (module doc);
    `tracked` are the record's positions whose change makes a new version."""
    events: dict[str, dict[int, Record]] = {}
    for batch in batches:
        for record in batch:
            held = events.setdefault(record[0], {}).get(record[2])
            if held is None or (record[3] == "d" and held[3] != "d"):
                events[record[0]][record[2]] = record
    out: dict[str, list[Row]] = {}
    for key, by_seq in events.items():
        rows: list[list[object]] = []
        previous: Record | None = None
        for seq in sorted(by_seq):
            record = by_seq[seq]
            ends = record[3] == "d" or _starts(previous, record, tracked)
            if rows and rows[-1][1] is None and ends:
                rows[-1][1] = seq  # the open row ends here
            if record[3] != "d":
                if _starts(previous, record, tracked):
                    rows.append([seq, None, True, *record[1:]])
                else:
                    rows[-1][3:] = list(record[1:])
            previous = record
        for row in rows:
            row[2] = row[1] is None
        if rows:
            out[key] = [tuple(r) for r in rows]  # type: ignore[misc]
    return out


def _starts(previous: Record | None, record: Record, tracked: Sequence[int] = (1,)) -> bool:
    if previous is None or previous[3] == "d":
        return True
    return any(previous[i] != record[i] for i in tracked)


def table_history(spark: SparkSession, table: str) -> dict[str, list[Row]]:
    rows = spark.table(table).collect()
    out: dict[str, list[Row]] = {}
    for r in sorted(rows, key=lambda r: (r["id"], r["_lh_valid_from"])):
        out.setdefault(r["id"], []).append(
            (
                r["_lh_valid_from"],
                r["_lh_valid_to"],
                r["_lh_is_current"],
                r["name"],
                r["seq"],
                r["op"],
                r["note"],
            )
        )
    return out


def commit(spark: SparkSession, spec: TableSpec, batch_id: int, batch: list[Record]) -> BatchResult:
    return commit_batch(TableWriter(spark, spec, "app"), batch_id, records(spark, batch))


def test_versions_are_kept_in_sequence_order_and_a_delete_closes_the_current_one(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """Versions within and across batches, one arriving late between two held ones, a delete
    closing the current row, the key coming back after it, a late version before the delete."""
    spec = history_table(make_table)
    batches = [
        [("a", "a1", 1, "c", ""), ("a", "a5", 5, "u", ""), ("b", "b1", 1, "c", "")],
        [("a", "a3", 3, "u", ""), ("a", "a5", 8, "d", ""), ("b", "b2", 2, "u", "")],
        [("a", "a9", 9, "c", ""), ("a", "a6", 6, "u", ""), ("c", "c1", 4, "d", "")],
    ]
    results = [commit(spark, spec, i, b) for i, b in enumerate(batches)]

    assert table_history(spark, spec.name) == expected_history(batches)
    assert table_history(spark, spec.name)["a"] == [
        (1, 3, False, "a1", 1, "c", ""),
        (3, 5, False, "a3", 3, "u", ""),
        (5, 6, False, "a5", 5, "u", ""),
        (6, 8, False, "a6", 6, "u", ""),
        (9, None, True, "a9", 9, "c", ""),
    ]
    second = results[1]
    assert (second.rows_inserted, second.rows_updated) == (2, 3)
    entries = [e for e in read_ledger(spark, spec.name) if e.meta.kind == "batch"]
    assert all(is_reconciled(e) for e in entries)
    assert verify_table(spark, spec).passed


def test_a_change_to_an_untracked_column_updates_the_version_in_place(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = history_table(make_table)
    batches = [
        [("a", "same", 1, "c", "first")],
        [("a", "same", 2, "u", "fixed typo"), ("a", "other", 4, "u", "")],
        [("a", "other", 3, "u", "late, same as the next")],
    ]
    for i, batch in enumerate(batches):
        commit(spark, spec, i, batch)

    history = table_history(spark, spec.name)["a"]
    assert history == expected_history(batches)["a"]
    assert history == [
        (1, 3, False, "same", 2, "u", "fixed typo"),
        (3, None, True, "other", 4, "u", ""),
    ]


def test_a_resent_or_replayed_batch_changes_nothing(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = history_table(make_table)
    batch = [
        ("a", "a1", 1, "c", ""),
        ("a", "a2", 2, "u", ""),
        ("a", "a2", 3, "u", "folds into the one before"),
        ("a", "a2", 4, "d", ""),
    ]
    commit(spark, spec, 0, batch)
    before = table_history(spark, spec.name)

    skipped = commit(spark, spec, 0, batch)
    resent = commit_batch(TableWriter(spark, spec, "other"), 0, records(spark, batch))

    assert skipped.status == "skipped"
    assert (resent.rows_inserted, resent.rows_updated, resent.rows_deleted) == (0, 0, 0)
    assert resent.rows_ignored_older == 3  # the versions; the delete is the recorded one
    assert table_history(spark, spec.name) == before == expected_history([batch])


@pytest.mark.parametrize("point", ["before_write", "after_commit"])
def test_a_failure_between_the_tombstones_and_the_rows_is_resolved_exactly_once(
    spark: SparkSession, make_table: MakeTable, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    spec = history_table(make_table)
    first = [("a", "a1", 1, "c", ""), ("b", "b1", 1, "c", "")]
    second = [("a", "a1", 4, "d", ""), ("a", "a2", 2, "u", ""), ("b", "b3", 3, "u", "")]
    commit(spark, spec, 0, first)

    monkeypatch.setenv("LAKEHOUSE_FAULT", f"{point}:raise@1")
    options = CommitOptions(max_attempts=1)
    writer = TableWriter(spark, spec, "app")
    if point == "before_write":
        with pytest.raises(InjectedFaultError):
            commit_batch(writer, 1, records(spark, second), options)
        assert table_history(spark, spec.name) == expected_history([first])
        # Its delete is recorded, its rows are not: a batch still committing, not a finding.
        assert verify_table(spark, spec).passed
    else:
        landed = commit_batch(writer, 1, records(spark, second), options)
        assert "confirmed from the log" in landed.note
    monkeypatch.delenv("LAKEHOUSE_FAULT")
    again = commit(spark, spec, 1, second)

    assert again.status == ("committed" if point == "before_write" else "skipped")
    assert table_history(spark, spec.name) == expected_history([first, second])
    entry = find_ledger_entry(spark, spec.name, "app", 1)
    assert entry is not None
    assert is_reconciled(entry)
    assert verify_table(spark, spec).passed


def test_verify_finds_a_history_broken_outside_the_pipeline(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = history_table(make_table)
    commit(spark, spec, 0, [("a", "a1", 1, "c", ""), ("a", "a2", 2, "u", "")])

    spark.sql(f"UPDATE {spec.name} SET _lh_valid_to = NULL, _lh_is_current = true")

    kinds = {f.kind for f in verify_table(spark, spec).findings}
    assert "history" in kinds


@pytest.mark.parametrize(
    ("options", "key", "says"),
    [
        ({"merge": "insert", "sequence_by": None, "delete_when": None}, "history", "upsert"),
        ({"tombstone_retention": timedelta(days=60)}, "tombstone", "history"),
        ({"track_history_columns": ("name",)}, "except_columns", "not both"),
        ({"except_columns": ("seq",)}, "except_columns", "sequence column"),
        ({"history": "scd3"}, "history", "'scd1' or 'scd2'"),
        ({"except_columns": ("name", "op", "note")}, "except_columns", "no column to track"),
    ],
)
def test_a_history_spec_that_cannot_work_is_refused(
    make_table: MakeTable, options: dict[str, object], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        history_table(make_table, **options)
    assert key in str(caught.value)
    assert says in str(caught.value)


@pytest.mark.slow  # 110 s: 10 batches, their failed attempts and resends
@pytest.mark.long  # make verify; CI runs the JSON scenario (test_history_sources.py) and the
# fixed failure points above
def test_random_late_versions_deletes_and_failures_match_the_independent_fold(
    spark: SparkSession, make_table: MakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shuffled versions and deletes of 8 keys in 10 batches (every version differs in `note`,
    so none folds: the test of an untracked change covers folding); about a third of the writes
    fail before their commit (run again, as a restarted stream would) or after it (resolved
    from the log); every third batch is sent again under another app id. The table matches the
    fold; every entry reconciles."""
    spec = history_table(make_table, except_columns=("op",))
    rng = random.Random(11)
    events: list[Record] = []
    for seq in range(1, 101):
        key = f"k{rng.randrange(8)}"
        op = "d" if rng.random() < 0.15 else "u"
        events.append((key, f"n{rng.randrange(3)}", seq, op, f"note{seq}"))
    rng.shuffle(events)
    batches = [events[i : i + 10] for i in range(0, len(events), 10)]
    monkeypatch.setenv("LAKEHOUSE_FAULT", "before_write:raise%30,after_commit:raise%30")
    monkeypatch.setenv("LAKEHOUSE_FAULT_SEED", "5")
    failures = resends = 0

    for batch_id, batch in enumerate(batches):
        writer = TableWriter(spark, spec, "app")
        failures += commit_through_faults(writer, batch_id, records(spark, batch))
        if batch_id % 3 == 0:
            monkeypatch.delenv("LAKEHOUSE_FAULT")
            resend = TableWriter(spark, spec, "resend")
            result = commit_batch(resend, resends, records(spark, batch))
            assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (0, 0, 0)
            resends += 1
            monkeypatch.setenv("LAKEHOUSE_FAULT", "before_write:raise%30,after_commit:raise%30")

    assert failures > 0
    assert table_history(spark, spec.name) == expected_history(batches, tracked=(1, 4))
    entries = [e for e in read_ledger(spark, spec.name) if e.meta.kind == "batch"]
    assert all(is_reconciled(e) for e in entries)
    assert verify_table(spark, spec).passed


def test_replay_brings_back_a_version_deleted_by_hand_and_changes_nothing_else(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    """Two files out of sequence order, a batch each; a history row deleted outside the
    pipeline; replaying both batches (dry run first) restores exactly it, again changes none."""
    spec = history_table(make_table)
    parts = [
        [("a", "a2", 2, "u", ""), ("b", "b1", 1, "c", ""), ("a", "a4", 4, "d", "")],
        [("a", "a1", 1, "c", ""), ("b", "b3", 3, "u", "")],
    ]
    landing = tmp_path / "landing"
    landing.mkdir()
    for n, part in enumerate(parts):
        names = ("id", "name", "seq", "op", "note")
        lines = [json.dumps(dict(zip(names, r, strict=True))) for r in part]
        (landing / f"{n}.json").write_text("\n".join(lines) + "\n")
        os.utime(landing / f"{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    source = FileSource(str(landing), "json", max_files_per_trigger=1)
    job = PipelineSpec(
        name="land",
        table=spec.name,
        app_id="land",
        source=source,
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )
    run_pipeline(spark, job, spec)
    expected = expected_history(parts)
    assert table_history(spark, spec.name) == expected
    spark.sql(f"DELETE FROM {spec.name} WHERE id = 'a' AND _lh_valid_from = 1")

    def replay(dry_run: bool) -> list[ReplayResult]:
        plans = plan_replay(spark, spec, "land", 0, None, source)
        writer = TableWriter(spark, spec, "land")
        return [replay_batch(writer, p, ReplayOptions(dry_run=dry_run)) for p in plans]

    dry = replay(dry_run=True)
    assert sum(r.rows_restored for r in dry) == 1
    assert table_history(spark, spec.name)["a"] == expected["a"][1:]
    first = replay(dry_run=False)
    assert [(r.rows_restored, r.rows_updated, r.rows_deleted) for r in first] == [
        (0, 0, 0),
        (1, 0, 0),
    ]
    assert table_history(spark, spec.name) == expected
    again = replay(dry_run=False)
    assert [(r.rows_restored, r.rows_updated, r.rows_already_present) for r in again] == [
        (0, 0, 3),  # its two versions and its delete
        (0, 0, 2),
    ]
    assert table_history(spark, spec.name) == expected
