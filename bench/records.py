"""JSON landed per second: the exact reader and the exactly-once commit beside Spark's own reader.

Each round lands new files (10,000 lines of 4 KiB by default, in four files, keys unseen before)
both ways, in turns: through `read_files` (text lines parsed with the table schema, every
record's fate decided, its exact text kept) and `commit_batch`, and through Spark's JSON reader
appended to a Delta table. The ratio is the first's MB/s over the second's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession
from workloads import interleaved_medians

from ingest.commit import commit_batch
from ingest.commit.options import CommitOptions
from ingest.sources.file_read import read_files
from ingest.sources.files import FileSource
from tables.delta.writer import TableWriter
from tables.spec import TableSpec

RECORD_SCHEMA = "id STRING NOT NULL, qty INT, note STRING"


def write_lines(
    landing: Path, lines: int, line_bytes: int, files: int = 4, run: int = 0
) -> list[str]:
    """`lines` JSON lines of about `line_bytes` bytes each, in `files` files; their paths.

    Keys and file names carry `run`, so each round lands records never seen before.
    """
    landing.mkdir(parents=True, exist_ok=True)
    per_file = lines // files
    paths = []
    for f in range(files):
        path = landing / f"run-{run}-part-{f}.json"
        with path.open("w") as out:
            for n in range(per_file):
                key = f"r{run}-{f}-{n}"
                filler = "x" * max(0, line_bytes - len(key) - 40)
                out.write(json.dumps({"id": key, "qty": n, "note": filler}) + "\n")
        paths.append(str(path))
    return paths


def json_landing_seconds(
    spark: SparkSession,
    home: Path,
    spec: Callable[..., TableSpec],
    lines: int,
    line_bytes: int,
    runs: int,
) -> tuple[float, float, int]:
    """Median seconds to land the files the lakehouse way and Spark's way, and their bytes."""
    rounds = [write_lines(home / "bench_json", lines, line_bytes, run=i) for i in range(runs + 1)]
    size = sum(Path(f).stat().st_size for f in rounds[0])
    table = spec("bench_json_exact", schema=RECORD_SCHEMA, keys=("id",))
    plain = f"bench_json_spark_{table.name}"
    source = FileSource(str(home / "bench_json"), "json")

    writer = TableWriter(spark, table, "json")

    def exact(i: int) -> object:
        batch = read_files(spark, source, table.data_schema(spark), rounds[i], table.records)
        return commit_batch(writer, i, batch, CommitOptions(raw_format="json"))

    def spark_reader(i: int) -> object:
        frame = spark.read.schema(RECORD_SCHEMA).json(rounds[i])
        frame.write.format("delta").mode("append").saveAsTable(plain)
        return None

    timed = interleaved_medians({"exact": exact, "spark": spark_reader}, runs)
    return timed["exact"], timed["spark"], size
