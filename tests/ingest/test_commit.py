"""The exactly-once batch commit against real Spark and Delta tables."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.decisions import ONE_TASK_BYTES
from tables.delta.history import find_ledger_entry, read_ledger, table_version
from tables.delta.markers import committed_batch, committed_batches
from tables.delta.table import table_detail
from tables.delta.writer import SpeedDevices, TableWriter
from tables.engine.jvm import code_compilations, estimated_bytes
from tables.errors import BatchContentMismatchError, CheckpointLostError, SchemaMismatchError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
SCHEMA = "event_id string, user_id string, amount double"


def events(spark: SparkSession, rows: list[tuple[str | None, str, float]]) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA)


def data(spark: SparkSession, table: str) -> DataFrame:
    return spark.table(table).select("event_id", "user_id", "amount")


def test_same_batch_twice_lands_once_and_second_is_skipped(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    batch = events(spark, [("e1", "u1", 1.0), ("e2", "u2", 2.0)])

    first = commit_batch(TableWriter(spark, spec, "app"), 0, batch)
    version = table_version(spark, spec.name)
    second = commit_batch(TableWriter(spark, spec, "app"), 0, batch)

    assert (first.status, first.rows_inserted, first.version) == ("committed", 2, version)
    assert second.status == "skipped"
    assert second.version == version
    assert table_version(spark, spec.name) == version
    assert_df_equality(data(spark, spec.name), batch, ignore_row_order=True, ignore_nullable=True)
    assert committed_batch(spark, spec.name, "app") == 0


@pytest.mark.parametrize("one_task", [True, False], ids=["one-task", "three-partitions"])
def test_copies_in_a_batch_land_once_and_a_conflicting_copy_is_quarantined(
    spark: SparkSession, make_table: MakeTable, one_task: bool
) -> None:
    """The same rows are kept whether the batch is classified in one task or across three."""
    spec = make_table()
    batch = events(
        spark, [("e1", "u1", 1.0), ("e1", "u1", 1.0), ("e1", "u9", 9.0), ("e2", "u2", 2.0)]
    )
    writer = TableWriter(spark, spec, "app", devices=SpeedDevices(one_task=one_task))

    result = commit_batch(writer, 0, batch.repartition(3))

    counts = (
        result.rows_read,
        result.rows_inserted,
        result.rows_duplicate_in_batch,
        result.rows_quarantined,
    )
    assert counts == (4, 2, 1, 1)
    expected = events(spark, [("e1", "u1", 1.0), ("e2", "u2", 2.0)])
    assert_df_equality(
        data(spark, spec.name), expected, ignore_row_order=True, ignore_nullable=True
    )
    [reason] = [r[0] for r in spark.table(spec.quarantine_name).select("_lh_reason").collect()]
    assert reason.startswith("conflicting duplicate: record key event_id=e1 appears")


def test_a_small_batch_is_written_by_one_task_as_one_file(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    """A batch Spark sizes below ONE_TASK_BYTES (read from files, or generated) is one task and
    one data file, whatever its partitions; without the device each partition writes a file.
    Rows Spark cannot size (a driver's list: Spark's very large default) keep their partitions."""
    landing = tmp_path / "landing"
    landing.mkdir()
    for part in range(3):
        lines = [f'{{"event_id": "e{part}{i}", "user_id": "u", "amount": {i}}}' for i in range(2)]
        (landing / f"{part}.json").write_text("\n".join(lines) + "\n")
    read = spark.read.schema(SCHEMA).json(str(landing))
    generated = spark.range(6).select(
        F.concat(F.lit("g"), F.col("id").cast("string")).alias("event_id"),
        F.lit("u").alias("user_id"),
        F.col("id").cast("double").alias("amount"),
    )
    files = {}
    for name, batch in (("read", read), ("generated", generated.repartition(3))):
        for one_task in (True, False):
            spec = make_table()
            writer = TableWriter(spark, spec, "app", devices=SpeedDevices(one_task=one_task))
            result = commit_batch(writer, 0, batch)
            assert (result.status, result.rows_inserted) == ("committed", 6)
            files[name, one_task] = table_detail(spark, spec.name).num_files

    assert files[("read", True)] == files[("generated", True)] == 1
    assert files[("read", False)] > 1
    assert files[("generated", False)] > 1
    listed = events(spark, [("e1", "u1", 1.0)])
    assert estimated_bytes(listed) is not None
    assert estimated_bytes(listed) >= ONE_TASK_BYTES
    large = spark.range(2_000_000).select(F.col("id").cast("string").alias("event_id"))
    assert estimated_bytes(large) is not None
    assert estimated_bytes(large) >= ONE_TASK_BYTES  # sized without a job


@pytest.mark.usefixtures("generated_code")
def test_a_small_batch_compiles_no_code_of_its_own_for_its_batch_id_and_time(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    """Spark writes a long or timestamp literal into generated code: as literals, each batch's id
    and ingestion time made its write compile new classes. A one-task batch joins them in as
    data: a steady commit of a file's rows compiles none, the same with literals does."""
    writers = {
        one_task: TableWriter(spark, make_table(), "app", devices=SpeedDevices(one_task=one_task))
        for one_task in (True, False)
    }
    compiled: dict[bool, list[int]] = {True: [], False: []}
    for batch_id in range(4):
        landed = tmp_path / f"{batch_id}.json"
        landed.write_text(f'{{"event_id": "e{batch_id}", "user_id": "u", "amount": 1.0}}\n')
        for one_task, writer in writers.items():
            before = code_compilations(spark)
            rows = spark.read.schema(SCHEMA).json(str(landed))
            assert commit_batch(writer, batch_id, rows).status == "committed"
            compiled[one_task].append(code_compilations(spark) - before)

    assert compiled[True][-1] == 0, compiled
    assert compiled[False][-1] > 0, compiled
    assert spark.table(writers[True].spec.name).select("_lh_batch_id").distinct().count() == 4


def test_an_empty_batch_commits_its_marker_and_ledger_entry_only(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """The ledger has no gap: an empty batch is a commit without a data file."""
    spec = make_table()
    files = table_detail(spark, spec.name).num_files
    version = table_version(spark, spec.name)

    result = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, []))
    again = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, []))

    assert (result.status, result.version, result.rows_read) == ("empty", version + 1, 0)
    assert again.status == "skipped"
    assert committed_batch(spark, spec.name, "app") == 0
    assert table_detail(spark, spec.name).num_files == files
    [entry] = read_ledger(spark, spec.name, app_id="app")
    assert (entry.meta.batch_id, entry.meta.rows_read, entry.rows_inserted) == (0, 0, 0)


def test_committed_batch_with_different_content_is_rejected(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [("e1", "u1", 1.0)]))

    with pytest.raises(BatchContentMismatchError, match="arrived again with hash") as info:
        commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [("e1", "u1", 1.5)]))

    assert "\n" not in str(info.value)
    assert data(spark, spec.name).collect()[0]["amount"] == 1.0


def test_two_app_ids_write_into_one_table(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app-a"), 0, events(spark, [("e1", "u1", 1.0)]))
    commit_batch(
        TableWriter(spark, spec, "app-b"), 0, events(spark, [("e1", "u1", 1.0), ("e2", "u2", 2.0)])
    )
    commit_batch(TableWriter(spark, spec, "app-a"), 1, events(spark, [("e3", "u3", 3.0)]))

    assert committed_batches(spark, spec.name) == {"app-a": 1, "app-b": 0}
    per_app = {
        r["_lh_app_id"]: r["n"]
        for r in spark.table(spec.name).groupBy("_lh_app_id").agg(F.count("*").alias("n")).collect()
    }
    assert per_app == {"app-a": 2, "app-b": 2}


def test_rewound_stream_is_stopped_with_both_numbers(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    for batch_id in range(3):
        commit_batch(
            TableWriter(spark, spec, "app"), batch_id, events(spark, [(f"e{batch_id}", "u", 1.0)])
        )

    with pytest.raises(CheckpointLostError, match=r"at batch 1 but table .* already holds batch 2"):
        commit_batch(
            TableWriter(spark, spec, "app"),
            1,
            events(spark, [("e1", "u", 1.0)]),
            CommitOptions(fail_on_rewind=True),
        )

    replay = commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, [("e1", "u", 1.0)]))
    assert replay.status == "skipped"


def test_ledger_records_source_counts_and_hash(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    result = commit_batch(
        TableWriter(spark, spec, "app"),
        5,
        events(spark, [("e1", "u1", 1.0), ("e1", "u1", 1.0)]),
        CommitOptions(source={"kind": "test", "note": "two rows"}),
    )

    entry = find_ledger_entry(spark, spec.name, "app", 5)
    assert entry is not None
    assert entry.version == result.version
    assert entry.meta.source == {"kind": "test", "note": "two rows"}
    assert (entry.meta.rows_read, entry.rows_inserted, entry.rows_duplicate_in_batch) == (2, 1, 1)
    assert entry.meta.content_hash == result.content_hash
    assert [e.meta.batch_id for e in read_ledger(spark, spec.name)] == [5]


def test_content_hash_ignores_row_order_and_partitioning(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    rows = [(f"e{i}", f"u{i % 3}", float(i)) for i in range(50)]
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, rows).repartition(4))

    again = commit_batch(
        TableWriter(spark, spec, "app"), 0, events(spark, list(reversed(rows))).coalesce(1)
    )

    assert again.status == "skipped"


def test_unknown_commit_outcome_is_resolved_from_the_log(
    spark: SparkSession, make_table: MakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    monkeypatch.setenv("LAKEHOUSE_FAULT", "after_commit:raise")

    result = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [("e1", "u1", 1.0)]))

    assert result.status == "committed"
    assert result.attempts == 1
    assert "confirmed from the log" in result.note
    assert data(spark, spec.name).count() == 1


def test_failure_before_write_is_retried(
    spark: SparkSession, make_table: MakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_table()
    calls = {"n": 0}
    import ingest.commit.merge as commit_module

    real = commit_module.fault_point

    def flaky(point: str, batch_id: int) -> None:
        if point == "before_write":
            calls["n"] += 1
            if calls["n"] == 1:
                monkeypatch.setenv("LAKEHOUSE_FAULT", "before_write:raise")
            else:
                monkeypatch.delenv("LAKEHOUSE_FAULT")
        real(point, batch_id)  # type: ignore[arg-type]

    monkeypatch.setattr(commit_module, "fault_point", flaky)
    result = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [("e1", "u1", 1.0)]))

    assert (result.status, result.attempts) == ("committed", 2)
    assert data(spark, spec.name).count() == 1


def test_non_deterministic_source_lands_each_record_once(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    batch = spark.range(200).select(
        F.concat(F.lit("e"), (F.col("id") % 100).cast("string")).alias("event_id"),
        F.concat(F.lit("u"), (F.rand() * 1000).cast("int").cast("string")).alias("user_id"),
        F.rand().alias("amount"),
    )

    result = commit_batch(TableWriter(spark, spec, "app"), 0, batch)

    table = spark.table(spec.name)
    assert result.rows_inserted == 100
    assert table.count() == 100
    assert table.select("event_id").distinct().count() == 100


def test_batch_with_other_schema_is_refused(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    wrong = spark.createDataFrame([("e1", 1, "x")], "event_id string, user_id int, extra string")

    with pytest.raises(
        SchemaMismatchError, match=r"user_id is int.*missing column amount.*unexpected column extra"
    ):
        commit_batch(TableWriter(spark, spec, "app"), 0, wrong)


def test_rejected_rows_go_to_quarantine_and_a_replay_adds_none(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    batch = events(spark, [("e1", "u1", 1.0), (None, "u2", 2.0)])

    first = commit_batch(TableWriter(spark, spec, "app"), 0, batch)
    commit_batch(TableWriter(spark, spec, "app"), 0, batch)

    assert (first.rows_inserted, first.rows_quarantined) == (1, 1)
    quarantine = spark.table(spec.quarantine_name).collect()
    assert [(r["_lh_batch_id"], r["_lh_reason"]) for r in quarantine] == [
        (0, "missing record key: event_id is null")
    ]


def test_all_rejected_batch_still_records_the_batch(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()

    result = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, [(None, "u", 1.0)]))

    assert (result.status, result.rows_inserted, result.rows_quarantined) == ("committed", 0, 1)
    assert committed_batch(spark, spec.name, "app") == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_batch_ids_are_value_errors(
    spark: SparkSession, make_table: MakeTable, bad: object
) -> None:
    spec = make_table()
    with pytest.raises(ValueError, match="batch_id"):
        commit_batch(TableWriter(spark, spec, "app"), bad, events(spark, []))  # type: ignore[arg-type]


def test_concurrent_commits_from_one_session_keep_markers_apart(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """Two writers share one SparkSession and commit at the same moment (delta-io/delta#3934).

    The txn confs are session-wide; if they leaked between the two commits, a marker would carry
    the other writer's batch id (the id ranges are disjoint: 0.. and 100..) or app id.
    """
    spec = make_table()
    batches = 6
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(app_id: str, first_batch: int) -> None:
        try:
            for i in range(batches):
                rows = [(f"{app_id}-{i}-{j}", app_id, float(i)) for j in range(5)]
                batch = events(spark, rows)
                barrier.wait()
                result = commit_batch(TableWriter(spark, spec, app_id), first_batch + i, batch)
                assert result.status == "committed", result
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=writer, args=("a", 0)),
        threading.Thread(target=writer, args=("b", 100)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors, errors
    assert committed_batches(spark, spec.name) == {"a": batches - 1, "b": 100 + batches - 1}
    for entry in read_ledger(spark, spec.name):
        rows = spark.table(spec.name).where(F.col("_lh_batch_id") == entry.meta.batch_id)
        assert {r["_lh_app_id"] for r in rows.collect()} == {entry.meta.app_id}
    assert spark.table(spec.name).count() == 2 * batches * 5
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None
