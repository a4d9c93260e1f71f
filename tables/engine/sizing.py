"""How big an embedded session's jobs are: partitions sized to the cores a `local` master has."""

from __future__ import annotations

import re

_MAX_EMBEDDED_PARTITIONS = 8
_LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")


def local_cores(master: str, cpu_count: int | None) -> int | None:
    """How many cores a `local`, `local[N]`, `local[*]` or `local[N, retries]` master uses.

    None for any other master (a standalone or YARN cluster): its size is not known here.
    """
    match = _LOCAL_MASTER.fullmatch(master.strip())
    if match is None:
        return None
    threads = match.group(1)
    if threads is None:
        return 1
    return max(1, cpu_count or 1) if threads == "*" else max(1, int(threads))


def embedded_sizing(cores: int | None) -> dict[str, str]:
    """Partition counts for an embedded session on `cores` cores (None: a cluster, use 8).

    Delta rebuilds a table's state (the file list and the txn markers every exactly-once commit
    reads) with a job of `snapshotPartitions` tasks, and each task of that job builds a cached
    partition: on a small log, a task per core instead of Delta's cluster default (50) makes the
    job several times cheaper. Shuffles and file listings (VACUUM's default is 10,000 tasks)
    follow the same size.
    """
    size = str(max(1, min(cores or _MAX_EMBEDDED_PARTITIONS, _MAX_EMBEDDED_PARTITIONS)))
    return {
        "spark.sql.shuffle.partitions": size,
        "spark.databricks.delta.snapshotPartitions": size,
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": size,
    }
