"""A killed run's temp files in a stream checkpoint, and Spark's hint in errors (finding 5)."""

from __future__ import annotations

import fcntl
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.checkpoint import (
    LOCK_FILE,
    CheckpointInUseError,
    is_spark_temp_file,
    local_path,
    remove_stopped_query_temp_files,
)
from ingest.config import PipelineSpec
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.errors import error_summary
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]

SPARK_ERROR = (
    "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
    "[STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY] The checkpoint location file:/cp/offsets should "
    "be empty on batch 0\n"
    "Please either use a new checkpoint location, or delete the existing data in the checkpoint "
    "location. SQLSTATE: 42K03 SQLSTATE: XXKST\n"
    "=== Streaming Query ===\n"
    "Identifier: lakehouse_p [id = 1, runId = 2]\n"
)


def test_spark_temp_file_names() -> None:
    name = f".0.{uuid.uuid4()}.tmp"
    assert is_spark_temp_file(name)
    assert is_spark_temp_file(f".{name}.crc")
    assert is_spark_temp_file(f".17.{uuid.uuid4()}.tmp")
    for other in (
        "0",
        ".0.crc",
        "metadata",
        ".0.tmp",
        f"0.{uuid.uuid4()}.tmp",
        f".x.{uuid.uuid4()}.tmp",
    ):
        assert not is_spark_temp_file(other)


def test_local_and_remote_locations() -> None:
    assert local_path("/a/b") == Path("/a/b")
    assert local_path("file:/a/b") == Path("/a/b")
    assert local_path("s3a://bucket/cp") is None


def test_error_summary_keeps_sparks_hint_line_and_drops_the_plan() -> None:
    summary = error_summary(RuntimeError(SPARK_ERROR))

    assert summary.startswith("[STREAM_FAILED]")
    assert "Please either use a new checkpoint location" in summary
    assert "Streaming Query" not in summary
    assert "\n" not in summary
    assert error_summary(RuntimeError("one line\n+- Project")) == "one line"


def test_error_summary_names_the_java_exception_behind_a_bare_py4j_error() -> None:
    text = (
        "An error occurred while calling o78.sql.\n"
        ": java.nio.file.AccessDeniedException: s3a://lake/t/_delta_log: getFileStatus\n"
        "\tat org.apache.hadoop.fs.s3a.S3AUtils.translateException(S3AUtils.java:260)\n"
    )
    assert error_summary(RuntimeError(text)) == (
        "java.nio.file.AccessDeniedException: s3a://lake/t/_delta_log: getFileStatus"
    )


def killed_during_offset_write(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A checkpoint as a SIGTERM during batch 0's offsets write leaves it (Spark's own names)."""
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    temp = checkpoint / "offsets" / f".0.{uuid.uuid4()}.tmp"
    temp.write_text('v1\n{"batchWatermarkMs":0}\n')
    crc = temp.with_name(f".{temp.name}.crc")
    crc.write_bytes(b"crc")
    return checkpoint, [temp, crc]


def pipeline(tmp_path: Path, spec: TableSpec, checkpoint: Path) -> PipelineSpec:
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    (landing / "a.json").write_text(
        json.dumps({"event_id": "e1", "user_id": "u", "amount": 1.0}) + "\n"
    )
    return PipelineSpec(
        "p", spec.name, "p", FileSource(str(landing), "json"), "available-now", str(checkpoint)
    )


def test_a_killed_runs_temp_files_are_removed_and_the_run_goes_on(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    checkpoint, leftovers = killed_during_offset_write(tmp_path)

    report = run_pipeline(spark, pipeline(tmp_path, spec, checkpoint), spec)

    assert [r.status for r in report.results] == ["committed"]
    removed = {Path(local_path(f) or f).name for f in report.removed_temp_files}
    assert removed == {f.name for f in leftovers}
    assert not any(f.exists() for f in leftovers)
    assert spark.table(spec.name).count() == 1


def test_a_checkpoint_another_run_holds_is_left_alone(
    spark: SparkSession, make_table: MakeTable, tmp_path: Path
) -> None:
    spec = make_table()
    checkpoint, leftovers = killed_during_offset_write(tmp_path)
    job = pipeline(tmp_path, spec, checkpoint)
    with open(checkpoint / LOCK_FILE, "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242 on elsewhere\n")
        held.flush()
        with pytest.raises(CheckpointInUseError, match="in use by another run"):
            run_pipeline(spark, job, spec)

    assert all(f.exists() for f in leftovers)
    assert spark.table(spec.name).count() == 0


def test_a_stopped_querys_temp_files_go_with_it_and_a_store_without_lock_keeps_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A stop between batches can cut Spark's write of the next offsets entry: the stopping run
    removes what it left (the entries beside it stay), a store no lock covers is not touched."""
    checkpoint, leftovers = killed_during_offset_write(tmp_path)
    entry = checkpoint / "offsets" / "0"
    entry.write_text("v1\n")

    removed = remove_stopped_query_temp_files(spark, str(checkpoint))

    assert sorted(Path(local_path(f) or f).name for f in removed) == sorted(
        f.name for f in leftovers
    )
    assert not any(f.exists() for f in leftovers)
    assert entry.exists()
    assert remove_stopped_query_temp_files(spark, str(checkpoint)) == []
    assert remove_stopped_query_temp_files(spark, "hdfs://nowhere:1/cp") == []
