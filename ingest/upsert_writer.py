"""One writer at a time on an upsert table, whatever its app id, across processes.

An upsert batch is two commits: its deletes into the tombstone table, then its rows. A second
writer with another app id could read the tombstones between another's two commits and land a
version the first one's delete should have dropped (docs/DESIGN.md#upserts). Two pipelines of one
config into one upsert table are refused when the config loads; this lock refuses a second run
from anywhere else (another config, another home, another host on the same store): a run of an
upsert table holds it for as long as it holds its checkpoint.

The lock lives beside the table's data, in a `_lh_writer` directory of the table's location
(Delta and VACUUM leave names that start with `_` alone): an advisory file lock on a local
table, the checkpoint lease (`ingest.checkpoint_lease`) on an object store.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ingest.checkpoint import holding
from ingest.checkpoint_lease import CheckpointLease
from tables.delta.table import table_detail
from tables.engine.jvm import is_classic
from tables.engine.object_store import is_object_store
from tables.engine.storage import local_path
from tables.errors import TerminalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tables.spec import TableSpec

WRITER_DIR = "_lh_writer"
LOCK_FILE = "writer.lock"


class UpsertWriterInUseError(TerminalError):
    """Another run writes the upsert table now; carries the table and who holds it."""

    def __init__(self, message: str, *, table: str, holder: str) -> None:
        super().__init__(message)
        self.table = table
        self.holder = holder


def should_hold_writer(spec: TableSpec) -> bool:
    """True if runs into the table take the one-writer lock (upsert tables)."""
    return spec.merge == "upsert"


@contextlib.contextmanager
def hold_upsert_writer(spark: SparkSession, spec: TableSpec, app_id: str) -> Iterator[None]:
    """Hold the table's writer lock for one run, or raise UpsertWriterInUseError.

    A table that is neither local nor on an object store (or reached over Spark Connect, where
    this process cannot lock the server's files) is not locked.
    """
    if not should_hold_writer(spec) or not is_classic(spark):
        yield
        return
    location = table_detail(spark, spec.name).location.rstrip("/") + "/" + WRITER_DIR
    local = local_path(location)
    if local is None:
        if is_object_store(location):
            with CheckpointLease(spark, location):
                yield
            return
        yield
        return

    def in_use(holder: str) -> UpsertWriterInUseError:
        return UpsertWriterInUseError(
            f"upsert table {spec.name} is written now by another run ({holder}): an upsert "
            "table takes one writer at a time (its tombstones and rows are two commits); wait "
            "for that run to end or stop it",
            table=spec.name,
            holder=holder,
        )

    holder = f"app id {app_id!r}, pid {os.getpid()} on {os.uname().nodename}"
    with holding(local / LOCK_FILE, holder, in_use, tries=1):
        yield
