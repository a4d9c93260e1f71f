"""The post-commit duplicate audit and the quality results table."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from quality.audit import audit_commit, audit_table, repair_duplicates
from quality.check_results import held_by, is_recorded, recent_results, record
from tables.delta.history import read_ledger
from tables.delta.markers import read_markers
from tables.delta.writer import TableWriter
from tables.engine.clones import SessionClones
from tables.errors import DuplicatesFoundError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]


def events(spark: SparkSession, ids: list[str]) -> DataFrame:
    return spark.createDataFrame(
        [(i, "u", 1.0) for i in ids], "event_id string, user_id string, amount double"
    )


def test_a_clean_commit_passes(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    result = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a", "b", "a"]))

    audit = audit_commit(TableWriter(spark, spec, "app"), 0, result.version)

    assert (audit.status, audit.checked_keys, audit.failing_keys) == ("passed", 2, 0)


def test_a_key_landed_by_two_batches_fails_and_is_recorded_once(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a", "b"]))
    result = commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, ["b", "c"]))

    audit = audit_commit(TableWriter(spark, spec, "app"), 1, result.version)
    record(spark, [audit], txn=(f"audit.{spec.name}.app", 1))
    record(spark, [audit], txn=(f"audit.{spec.name}.app", 1))

    assert (audit.status, audit.checked_keys, audit.failing_keys, audit.sample_keys) == (
        "failed",
        2,
        1,
        ("b",),
    )
    assert is_recorded(spark, spec.name, "app", 1)
    assert not is_recorded(spark, spec.name, "app", 0)
    [row] = recent_results(spark, spec.name, 10)
    assert (row["status"], row["failing_keys"], row["table_version"]) == (
        "failed",
        1,
        result.version,
    )
    by_sql = spark.sql(
        f"SELECT count(*) AS n FROM lakehouse_quality WHERE table_name = '{spec.name}'"
    ).collect()
    assert by_sql[0]["n"] == 1


def test_a_commit_hands_the_audit_its_key_bounds(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """The bounds cover the valid rows only, and the audit given them agrees with one without."""
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["b", "c"]))
    rows = [("c", "u", 1.0), ("d", "u", 1.0), ("", "u", 1.0), ("zz", "u", None)]
    batch = spark.createDataFrame(rows, "event_id string, user_id string, amount double")
    result = commit_batch(TableWriter(spark, spec, "app"), 1, batch)

    assert result.status == "committed"
    assert result.key_bounds == (("event_id", "c", "zz"),)
    bounds = {key: (low, high) for key, low, high in result.key_bounds}
    given = audit_commit(TableWriter(spark, spec, "app"), 1, result.version, bounds)
    found = audit_commit(TableWriter(spark, spec, "app"), 1, result.version)

    assert (given.status, given.checked_keys, given.failing_keys, given.sample_keys) == (
        "failed",
        3,
        1,
        ("c",),
    )
    assert (found.status, found.checked_keys, found.failing_keys, found.sample_keys) == (
        given.status,
        given.checked_keys,
        given.failing_keys,
        given.sample_keys,
    )
    assert given.files_read is not None
    assert found.files_read is not None
    assert given.files_read < found.files_read


def test_a_skipped_batch_carries_no_bounds(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a"]))

    again = commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["a"]))

    assert (again.status, again.key_bounds) == ("skipped", ())


def test_full_table_audit(spark: SparkSession, make_table: MakeTable) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "x"), 0, events(spark, ["a", "b"]))
    commit_batch(TableWriter(spark, spec, "y"), 0, events(spark, ["a", "c", "d"]))

    audit = audit_table(spark, spec)

    assert (audit.status, audit.checked_keys, audit.failing_keys) == ("failed", 4, 1)


def test_the_audit_of_one_commit_reads_its_own_files_not_the_table(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table()
    for batch in range(12):
        ids = [f"k{batch:03d}-{i:03d}" for i in range(40)]
        result = commit_batch(TableWriter(spark, spec, "app"), batch, events(spark, ids))
    table_files = spark.sql(f"DESCRIBE DETAIL {spec.name}").first()["numFiles"]

    audit = audit_commit(TableWriter(spark, spec, "app"), 11, result.version)
    full = audit_table(spark, spec)

    assert (audit.status, audit.checked_keys) == ("passed", 40)
    assert table_files >= 12
    assert full.files_read == table_files
    assert audit.files_read is not None
    assert audit.files_read <= 2 * table_files // 12 + 2


def test_a_commit_carries_the_tables_key_range_to_the_next_audit(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """Each commit widens the range it read by its batch; the next, outside it, reads nothing."""
    spec = make_table()
    writer = TableWriter(spark, spec, "app")
    for batch in range(3):
        ids = [f"e{batch}{i}" for i in range(5)]
        result = commit_batch(writer, batch, events(spark, ids))
        assert result.audit is not None
        assert (result.audit.status, result.audit.files_read) == ("passed", 0)
    read = read_markers(spark, spec.name)

    known = writer.key_ranges.known(read.table_id, read.version, spec.keys)

    assert result.version == read.version
    assert known is not None
    assert known.bounds == {"event_id": ("e00", "e24")}


def test_another_writers_rows_between_two_commits_are_audited(
    spark: SparkSession, make_table: MakeTable
) -> None:
    """A commit this process did not make leaves the range unknown: the audit reads the table."""
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, events(spark, ["e10", "e11"]))
    spark.sql(
        f"INSERT INTO {spec.name} (event_id, user_id, amount, _lh_app_id, _lh_batch_id, "
        "_lh_ingested_at) VALUES ('e25', 'other', 2.0, 'other', 0, current_timestamp())"
    )

    result = commit_batch(TableWriter(spark, spec, "app"), 1, events(spark, ["e25", "e26"]))

    assert result.audit is not None
    assert (result.audit.status, result.audit.sample_keys) == ("failed", ("e25",))
    assert copies_of(spark, spec, "e25") == ["other", "u"]


def land_two_batches(spark: SparkSession, spec: TableSpec, tmp_path: Path) -> PipelineSpec:
    """Land batch 0 (a-e), then batch 1 (e-h): key e is resent under a new batch id."""
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    for n, ids in enumerate(["abcde", "efgh"]):
        lines = [json.dumps({"event_id": i, "user_id": f"u{n}", "amount": 1.0}) for i in ids]
        (landing / f"{n}.json").write_text("\n".join(lines) + "\n")
        os.utime(landing / f"{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    return PipelineSpec(
        name="twice",
        table=spec.name,
        app_id="twice",
        source=FileSource(str(landing), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
    )


def copies_of(spark: SparkSession, spec: TableSpec, key: str) -> list[str]:
    rows = spark.table(spec.name).where(f"event_id = '{key}'").collect()
    return sorted(r["user_id"] for r in rows)


def test_warn_policy_records_the_duplicate_and_goes_on(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(audit_policy="warn")

    report = run_pipeline(spark, land_two_batches(spark, spec, tmp_path), spec)

    [finding] = report.failed_audits
    assert (finding.batch_id, finding.failing_keys, finding.sample_keys) == (1, 1, ("e",))
    assert copies_of(spark, spec, "e") == ["u0", "u1"]
    assert held_by(spark, spec.name) is None


def test_fail_policy_holds_the_table_until_a_repair(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(audit_policy="fail")
    job = land_two_batches(spark, spec, tmp_path)

    with pytest.raises(DuplicatesFoundError, match="audit of batch 1 of app id 'twice'"):
        run_pipeline(spark, job, spec)
    (tmp_path / "landing" / "2.json").write_text('{"event_id": "z", "amount": 1.0}\n')
    with pytest.raises(DuplicatesFoundError, match="ingestion is held"):
        run_pipeline(spark, job, spec)
    assert spark.table(spec.name).where("event_id = 'z'").count() == 0

    audit = audit_table(spark, spec)
    repaired = repair_duplicates(spark, spec, audit, SessionClones())
    record(spark, [audit, repaired], txn=None)
    report = run_pipeline(spark, job, spec)

    assert repaired.status == "repaired"
    assert copies_of(spark, spec, "e") == ["u0"]
    assert [r.batch_id for r in report.results if r.status == "committed"] == [2]
    assert spark.table(spec.name).where("event_id = 'z'").count() == 1


def test_repair_policy_deletes_the_later_copy_in_a_recorded_commit(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table(audit_policy="repair")

    report = run_pipeline(spark, land_two_batches(spark, spec, tmp_path), spec)

    assert copies_of(spark, spec, "e") == ["u0"]
    assert spark.table(spec.name).count() == 8
    statuses = [(a.batch_id, a.status) for a in report.audits]
    assert statuses == [(0, "passed"), (1, "failed"), (1, "repaired")]
    kinds = [e.meta.kind for e in read_ledger(spark, spec.name)]
    assert kinds == ["repair", "batch", "batch"]
    again = audit_table(spark, spec)
    assert again.status == "passed"


def test_a_full_repair_of_an_upsert_table_keeps_the_newest_version_of_each_key(
    spark: SparkSession, make_table: MakeTable
) -> None:
    spec = make_table(
        schema="id STRING NOT NULL, seq BIGINT, name STRING",
        keys=("id",),
        merge="upsert",
        sequence_by="seq",
    )
    first = spark.createDataFrame(
        [("k", 5, "older"), ("j", 1, "only")], "id string, seq bigint, name string"
    )
    commit_batch(TableWriter(spark, spec, "first"), 0, first)
    # A second process's copy of the key, landed later with a newer version (two writers at once).
    spark.sql(
        f"INSERT INTO {spec.name} (id, seq, name, _lh_app_id, _lh_batch_id, _lh_ingested_at) "
        "VALUES ('k', 9, 'newer', 'second', 0, current_timestamp() + INTERVAL 1 SECOND)"
    )

    audit = audit_table(spark, spec)
    repaired = repair_duplicates(spark, spec, audit, SessionClones())

    assert (audit.status, repaired.status) == ("failed", "repaired")
    rows = {r["id"]: (r["seq"], r["name"]) for r in spark.table(spec.name).collect()}
    assert rows == {"k": (9, "newer"), "j": (1, "only")}
    assert audit_table(spark, spec).status == "passed"
