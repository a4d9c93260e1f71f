"""Context: delta-rs's exactly-once MERGE of the same batch shape, on one machine, no Spark.

What a user with one machine would pick instead: the same insert-only MERGE keyed on the
lineage and the record key, carrying a txn marker (`Transaction(app_id, version)`) that the
next batch probes with `DeltaTable.transaction_version` before writing.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

APP_ID = "rs"


def _batch(first: int, rows: int, batch_id: int) -> pa.Table:
    ids = range(first, first + rows)
    now = datetime.now(UTC)
    return pa.table(
        {
            "_lh_app_id": [APP_ID] * rows,
            "_lh_batch_id": pa.array([batch_id] * rows, pa.int64()),
            "_lh_ingested_at": [now] * rows,
            "event_id": [f"e{n}" for n in ids],
            "user_id": [f"u{n % 1000}" for n in ids],
            "amount": [n % 997 / 7 for n in ids],
        }
    )


def _commit(path: Path, batch_id: int, rows: int) -> tuple[float, float]:
    """Probe the marker, then MERGE the batch with its marker; (probe s, whole batch s)."""
    batch = _batch(batch_id * rows, rows, batch_id)
    started = time.perf_counter()
    table = DeltaTable(str(path))
    committed = table.transaction_version(APP_ID)
    probed = time.perf_counter()
    if committed is None or batch_id > committed:
        (
            table.merge(
                batch,
                f"t._lh_app_id = '{APP_ID}' AND t._lh_batch_id = {batch_id} "
                "AND t.event_id = s.event_id",
                source_alias="s",
                target_alias="t",
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(APP_ID, batch_id)]
                ),
            )
            .when_not_matched_insert_all()
            .execute()
        )
    return probed - started, time.perf_counter() - started


def merge_seconds(path: Path, rows: int, runs: int) -> tuple[float, float]:
    """Median marker probe and median whole exactly-once batch over `runs` batches after one."""
    write_deltalake(str(path), _batch(0, 1, 0).slice(0, 0), partition_by=["_lh_app_id"])
    timings = [_commit(path, batch_id, rows) for batch_id in range(runs + 1)][1:]
    return (
        statistics.median(t[0] for t in timings),
        statistics.median(t[1] for t in timings),
    )
