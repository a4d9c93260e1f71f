"""A downstream reader in its own process: a table's change data feed streamed into a sink.

Run as `python -m tests.support.downstream HOME TABLE SINK CHECKPOINT [STALL_AT]`. It starts its
own embedded Spark session on HOME (the warehouse catalog finds TABLE by name), streams TABLE's
change data feed from version 0 (one data file per micro-batch) into the Delta table at SINK
with the documented exactly-once pattern (a checkpoint, and each micro-batch appended with
`txnAppId`/`txnVersion`), and prints `wrote <batch id> <rows>` after each write. With STALL_AT it
prints `stalled` after writing that batch and waits to be killed: the write landed, the
checkpoint has not recorded it. Without it, it runs every second until killed.
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    """Stream the table's changes into the sink until killed."""
    home, table, sink, checkpoint, *rest = argv
    stall_at = int(rest[0]) if rest else None
    from pyspark.sql import DataFrame

    from tables.delta.table import require_table
    from tables.engine.session import get_spark

    spark = get_spark(home, app_name="downstream")
    require_table(spark, table)

    def write(batch: DataFrame, batch_id: int) -> None:
        (
            batch.write.format("delta")
            .mode("append")
            .option("txnAppId", "downstream")
            .option("txnVersion", batch_id)
            .save(sink)
        )
        print(f"wrote {batch_id} {batch.count()}", flush=True)
        if batch_id == stall_at:
            print("stalled", flush=True)
            time.sleep(3600)

    changes = (
        spark.readStream.option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .option("maxFilesPerTrigger", 1)
        .table(table)
    )
    query = (
        changes.writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
