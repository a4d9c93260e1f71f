"""A second writer in its own process, for zombie tests: one `commit_batch` into a shared table.

Run as `python -m tests.support.writer HOME LOCATION TABLE APP_ID BATCH_ID FIRST COUNT [TAG]`. It
starts its own embedded Spark session (its own metastore at HOME), registers the Delta table at
LOCATION under TABLE, prints `ready`, commits events FIRST..FIRST+COUNT-1 (their `user_id` is TAG,
so another TAG is other content) as batch BATCH_ID of APP_ID, and prints the result as JSON. A
project error is printed as `error: <kind>: <class>: <message>` with exit 1 (terminal) or 75
(transient).
LAKEHOUSE_FAULT stalls or kills it at a fault point like any ingestion.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from tables.delta.writer import TableWriter
from tables.errors import LakehouseError, first_line

SCHEMA = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"


def main(argv: list[str]) -> int:
    """Commit one batch into a table shared with another process; print what happened."""
    home, location, table, app_id, batch, first, count, *rest = argv
    tag = rest[0] if rest else "u"
    from ingest.commit import commit_batch
    from tables.engine.session import get_spark
    from tables.spec import TableSpec

    spark = get_spark(home, app_name="zombie-writer")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} USING DELTA LOCATION '{location}'")
    spec = TableSpec(name=table, schema_ddl=SCHEMA, keys=("event_id",))
    rows = [(f"e{i}", tag, float(i)) for i in range(int(first), int(first) + int(count))]
    frame = spark.createDataFrame(rows, "event_id STRING, user_id STRING, amount DOUBLE")
    print("ready", flush=True)
    try:
        result = commit_batch(TableWriter(spark, spec, app_id), int(batch), frame)
    except LakehouseError as exc:
        print(f"error: {exc.kind}: {type(exc).__name__}: {first_line(exc)}", flush=True)
        return 75 if exc.kind == "transient" else 1
    print(json.dumps(dataclasses.asdict(result), default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
