"""The log store of `file:` tables lists `_delta_log` exactly as Delta's own store does.

Every session the project builds gives local tables `lakehouse.LocalListingLogStore`
(`tables/engine/java/logstore/`), which reads the directory's names and builds the statuses of
the files at or after the start only (Delta's store builds one for every file of the log, so a
long stream's commits grow slower: docs/benchmarks.md, "A long run"). The whole fast tier runs on
it; here its listing is compared with Delta's on a real log with checkpoints and Hadoop's `.crc`
files, from every kind of start.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from tables.delta.commits import commit_markers
from tables.delta.ledger import admin_metadata
from tables.delta.table import table_detail
from tables.engine.jvm import gateway, hadoop_configuration
from tables.engine.object_store import LOCAL_LOG_STORE_CLASS, LOCAL_LOG_STORE_CONF
from tables.engine.storage import local_path
from tables.spec import TableSpec

COMMITS = 8


def test_the_listing_store_returns_what_deltas_own_store_returns_from_every_start(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    assert spark.conf.get(LOCAL_LOG_STORE_CONF) == LOCAL_LOG_STORE_CLASS
    spec = make_table(properties={"delta.checkpointInterval": "3"})
    for n in range(COMMITS):
        meta = admin_metadata("log", n, "reset", {"kind": "test", "commit": n})
        commit_markers(spark, spec.name, {"log": n}, meta)
    location = table_detail(spark, spec.name).location
    directory = local_path(location)
    assert directory is not None
    names = sorted(p.name for p in (directory / "_delta_log").iterdir())
    assert any(n.startswith(".") and n.endswith(".crc") for n in names)  # Hadoop's own
    assert any(n.endswith(".checkpoint.parquet") for n in names)

    jvm = gateway(spark, "compare log listings")
    conf = hadoop_configuration(spark, "compare log listings")
    ours = jvm.lakehouse.LocalListingLogStore(conf)
    deltas = jvm.io.delta.storage.HDFSLogStore(conf)
    log = jvm.org.apache.hadoop.fs.Path(f"{location.rstrip('/')}/_delta_log")
    version = f"{0:020d}"
    starts = [
        f"{version}.json",
        f"{6:020d}.checkpoint.parquet",
        f"{COMMITS:020d}.json",
        f"{COMMITS + 5:020d}.json",
        "_last_checkpoint",
        "+",  # before every name, Hadoop's hidden `.crc` files included
    ]
    for start in starts:
        path = jvm.org.apache.hadoop.fs.Path(log, start)
        assert _listed(ours, path, conf) == _listed(deltas, path, conf), start
    everything = _listed(ours, jvm.org.apache.hadoop.fs.Path(log, starts[-1]), conf)
    assert [Path(name).name for name, *_ in everything] == [
        n for n in names if not (n.startswith(".") and n.endswith(".crc"))
    ]

    missing = jvm.org.apache.hadoop.fs.Path(f"{location.rstrip('/')}/nowhere/{version}.json")
    for store in (ours, deltas):
        with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
            store.listFrom(missing, conf)


def _listed(store: Any, path: Any, conf: Any) -> list[tuple[str, int, int, bool]]:
    """What `store.listFrom(path)` returns: name, length, modified, is a directory."""
    found = store.listFrom(path, conf)
    statuses = []
    while found.hasNext():
        status = found.next()
        statuses.append(
            (
                status.getPath().toString(),
                status.getLen(),
                status.getModificationTime(),
                status.isDirectory(),
            )
        )
    return statuses
