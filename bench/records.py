"""JSON landed per second: the exact reader and the exactly-once commit beside Spark's own reader.

The same files (10,000 lines of 4 KiB by default, in four files) are landed both ways, batch by
batch in turns: through `read_files` (text lines parsed with the table schema, every record's
fate decided, its exact text kept) and `commit_batch`, and through Spark's JSON reader appended
to a Delta table. The ratio is the first's MB/s over the second's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession
from workloads import interleaved_medians

from ingest.commit import commit_batch
from ingest.sources.file_read import read_files
from ingest.sources.files import FileSource
from tables.spec import TableSpec

RECORD_SCHEMA = "id STRING NOT NULL, qty INT, note STRING"


def write_lines(landing: Path, lines: int, line_bytes: int, files: int = 4) -> list[str]:
    """`lines` JSON lines of about `line_bytes` bytes each, in `files` files; their paths."""
    landing.mkdir(parents=True, exist_ok=True)
    per_file = lines // files
    paths = []
    for f in range(files):
        path = landing / f"part-{f}.json"
        with path.open("w") as out:
            for n in range(per_file):
                key = f"r{f}-{n}"
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
    files = write_lines(home / "bench_json", lines, line_bytes)
    size = sum(Path(f).stat().st_size for f in files)
    table = spec("bench_json_exact", schema=RECORD_SCHEMA, keys=("id",))
    plain = f"bench_json_spark_{table.name}"
    source = FileSource(str(home / "bench_json"), "json")

    def exact(i: int) -> object:
        batch = read_files(spark, source, table.data_schema(spark), files, table.records)
        return commit_batch(spark, table, "json", i, batch, raw_format="json")

    def spark_reader(i: int) -> object:
        frame = spark.read.schema(RECORD_SCHEMA).json(files)
        frame.write.format("delta").mode("append").saveAsTable(plain)
        return None

    timed = interleaved_medians({"exact": exact, "spark": spark_reader}, runs)
    return timed["exact"], timed["spark"], size
