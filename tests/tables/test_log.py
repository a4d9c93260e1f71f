from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from ingest.commit import commit_batch
from tables.delta.history import find_ledger_entry, history_rows, latest_ledger_entry, table_at
from tables.delta.ledger import CommitMetadata, describe_source, ledger_entry_from_history
from tables.delta.markers import committed_batch, is_checksum_complete, read_markers
from tables.delta.table import table_detail
from tables.delta.writer import TableWriter
from tables.engine.jvm import delta
from tables.errors import TableNotFoundError
from tables.spec import TableSpec
from tests.support.app_batches import EVENT_DDL, two_rows, with_batches
from tests.support.delta_cache import clear_log_cache
from tests.support.jobs import spark_jobs

T = TypeVar("T")

META = CommitMetadata(
    app_id="app",
    batch_id=4,
    source={"kind": "files", "format": "json", "files": ["/l/a.json", "/l/b.json"]},
    rows_read=10,
    rows_quarantined=1,
    content_hash="abc",
    commit_token="tok",
)


def test_commit_metadata_round_trips() -> None:
    assert CommitMetadata.from_json(META.to_json()) == META


def test_foreign_user_metadata_is_ignored() -> None:
    assert CommitMetadata.from_json(None) is None
    assert CommitMetadata.from_json("hand-written note") is None
    assert CommitMetadata.from_json('{"app_id": "x"}') is None


def test_ledger_entry_derives_counts_from_merge_metrics() -> None:
    row = {
        "version": 7,
        "timestamp": datetime(2026, 1, 1),
        "operation": "MERGE",
        "userMetadata": META.to_json(),
        "operationMetrics": {"numSourceRows": "8", "numTargetRowsInserted": "5"},
    }
    entry = ledger_entry_from_history(row)
    assert entry is not None
    assert (entry.rows_inserted, entry.rows_already_present, entry.rows_duplicate_in_batch) == (
        5,
        3,
        1,
    )
    assert entry.as_row()["source"] == "json: a.json, b.json"


def test_describe_source_names_the_columns_a_schema_commit_added_or_widened() -> None:
    added = {"added_columns": {"score": "bigint", "tags": "string"}}
    assert describe_source(added) == "added columns: score bigint, tags string"
    widened = {"widened_columns": {"qty": "bigint"}}
    assert describe_source(widened) == "widened columns: qty bigint"
    assert describe_source({"type_widening": "enabled"}) == "type widening enabled"


def test_describe_source_truncates_long_file_lists() -> None:
    files = [f"/l/{i}.json" for i in range(5)]
    assert describe_source({"format": "json", "files": files}).endswith("(+2 more)")


def test_checksum_markers_are_trusted_only_when_complete() -> None:
    assert is_checksum_complete(3, 100, retention_set=False)
    assert not is_checksum_complete(None, 100, retention_set=False)
    assert not is_checksum_complete(100, 100, retention_set=False)
    assert not is_checksum_complete(3, 100, retention_set=True)


def test_markers_are_read_from_the_checksum_without_a_spark_job(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = with_batches(spark, make_table(), 0, 1)
    clear_log_cache(spark)  # as a new process would

    read, jobs = spark_jobs(spark, lambda: read_markers(spark, spec.name))

    assert (read.markers, read.from_checksum, jobs) == ({"app": 1}, True, 0)


def test_a_missing_checksum_falls_back_to_deltas_own_read(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = with_batches(spark, make_table(), 0, 1)
    log = Path(table_detail(spark, spec.name).location.removeprefix("file:")) / "_delta_log"
    latest = max(log.glob("*.crc"))
    latest.unlink()
    clear_log_cache(spark)

    read = read_markers(spark, spec.name)

    assert (read.markers, read.from_checksum) == ({"app": 1}, False)


def test_a_checksum_without_markers_falls_back_to_deltas_own_read(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, two_rows(spark, 0))
    spark.conf.set("spark.databricks.delta.setTransactionsInCrc.writeOnCommit", "false")
    try:
        commit_batch(TableWriter(spark, spec, "app"), 1, two_rows(spark, 1))
    finally:
        spark.conf.unset("spark.databricks.delta.setTransactionsInCrc.writeOnCommit")
    clear_log_cache(spark)

    read = read_markers(spark, spec.name)

    assert (read.markers, read.from_checksum) == ({"app": 1}, False)
    assert committed_batch(spark, spec.name, "app") == 1


def test_the_newest_commit_is_read_as_a_ledger_entry_without_a_spark_job(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = make_table()
    result = commit_batch(TableWriter(spark, spec, "app"), 0, two_rows(spark, 0))

    entry, jobs = spark_jobs(spark, lambda: latest_ledger_entry(spark, spec.name))

    assert entry is not None
    assert jobs == 0
    assert (entry.version, entry.meta.batch_id, entry.rows_inserted) == (result.version, 0, 2)


def test_the_embedded_session_builds_plans_without_call_site_capture(spark: SparkSession) -> None:
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()


def test_a_missing_table_is_named_by_the_reads_that_look_it_up_only_on_failure(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = make_table()
    missing = TableSpec(f"{spec.name}_never_created", EVENT_DDL, ("event_id",))
    expected = f"table '{missing.name}' not found in the catalog"

    with pytest.raises(TableNotFoundError, match=expected):
        read_markers(spark, missing.name)
    with pytest.raises(TableNotFoundError, match=expected):
        find_ledger_entry(spark, missing.name, "app", 0)
    with pytest.raises(TableNotFoundError, match=expected):
        commit_batch(TableWriter(spark, missing, "app"), 0, two_rows(spark, 0))


def _version_as_of(spark: SparkSession, table: str, version: int) -> DataFrame:
    return spark.read.option("versionAsOf", version).table(table)


def test_the_table_at_the_version_just_read_is_that_snapshot_read_as_delta_reads_it(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = with_batches(spark, make_table(), 0, 1)
    version = read_markers(spark, spec.name).version
    within = "event_id BETWEEN 'e1a' AND 'e1b'"

    pinned = delta.snapshot_frame(spark, spec.name, version)

    assert pinned is not None
    expected = _version_as_of(spark, spec.name, version)
    assert_df_equality(table_at(spark, spec.name, version), expected, ignore_row_order=True)
    narrowed = table_at(spark, spec.name, version).where(within).inputFiles()
    assert sorted(narrowed) == sorted(expected.where(within).inputFiles())
    assert len(narrowed) < len(expected.inputFiles())  # Delta's file skipping applies


def test_the_table_at_an_older_version_than_the_process_holds_is_read_by_time_travel(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = make_table()
    commit_batch(TableWriter(spark, spec, "app"), 0, two_rows(spark, 0))
    version = read_markers(spark, spec.name).version
    commit_batch(
        TableWriter(spark, spec, "app"), 1, two_rows(spark, 1)
    )  # this process's snapshot moves on

    assert delta.snapshot_frame(spark, spec.name, version) is None
    keys = {r.event_id for r in table_at(spark, spec.name, version).collect()}
    assert keys == {"e0a", "e0b"}


def test_the_table_at_a_version_hides_rows_deleted_through_deletion_vectors(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    spec = make_table()
    commit_batch(
        TableWriter(spark, spec, "app"), 0, two_rows(spark, 0).coalesce(1)
    )  # both rows in one file
    spark.sql(f"ALTER TABLE {spec.name} SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    deleted = spark.sql(f"DELETE FROM {spec.name} WHERE event_id = 'e0a'").first()
    version = read_markers(spark, spec.name).version

    assert deleted is not None
    assert deleted["num_affected_rows"] == 1
    (delete,) = history_rows(spark, spec.name, 1)
    assert delete["operationMetrics"]["numDeletionVectorsAdded"] == "1"  # the file is kept

    rows = table_at(spark, spec.name, version)

    assert [r.event_id for r in rows.collect()] == ["e0b"]
    assert_df_equality(rows, _version_as_of(spark, spec.name, version))
