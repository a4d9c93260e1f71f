"""Lines of 100 MiB and 1 GiB: quarantined by their size and first bytes, never read into memory.

The reader would hold such a line whole (a gigabyte ends a default driver's JVM); the line scan
finds it first and the file is read from a copy without it. Slow: each writes and scans the line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.sources.file_read import read_files
from ingest.sources.files import FileSource
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

pytestmark = pytest.mark.slow
MIB = 1024 * 1024


@pytest.mark.parametrize(
    "size",
    [100 * MIB, pytest.param(1024 * MIB, marks=pytest.mark.long)],
    ids=["100MiB", "1GiB"],
)
def test_a_huge_line_is_quarantined_and_the_rest_of_its_file_lands(
    spark: SparkSession, make_table: Callable[..., TableSpec], tmp_path: Path, size: int
) -> None:
    spec = make_table(schema="id STRING NOT NULL, note STRING", keys=("id",))
    landing = tmp_path / "landing"
    landing.mkdir()
    path = landing / "huge.json"
    head = b'{"id": "huge", "note": "'
    with path.open("wb") as out:
        out.write(b'{"id": "before"}\n' + head)
        chunk = b"z" * MIB
        for _ in range((size - len(head) - 2) // MIB):
            out.write(chunk)
        out.write(b"z" * ((size - len(head) - 2) % MIB) + b'"}\n{"id": "after"}\n')
    source = FileSource(str(landing), "json")

    batch = read_files(spark, source, spec.data_schema(spark), [str(path)], spec.records)
    result = commit_batch(
        TableWriter(spark, spec, "huge"), 0, batch, CommitOptions(raw_format="json")
    )

    assert (result.rows_read, result.rows_inserted, result.rows_quarantined) == (3, 2, 1)
    assert sorted(r["id"] for r in spark.table(spec.name).collect()) == ["after", "before"]
    (row,) = spark.table(spec.quarantine_name).collect()
    assert row["_lh_reason"].startswith(f"record too large: {size:,} bytes (line 2 of its file)")
    assert row["_lh_raw"] == (head + b"z" * 1000).decode()
    path.unlink()
