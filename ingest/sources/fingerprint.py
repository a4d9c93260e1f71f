"""A batch's source fingerprint: what it read, stated so that equal means the same content.

A re-run batch (a retry, a restart after a crash before the stream's checkpoint) is skipped only
after its content is checked against what was committed. Hashing it means reading and
classifying it again. A fingerprint recorded in the ledger entry settles it without that: the
files the batch read with their sizes and modification times (a file rewritten in place changes
one of them), or the Kafka offset ranges it covered (a record at an offset never changes). Where
no fingerprint can be made, the content hash decides (`ingest.commit.skip`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ingest.decisions import FINGERPRINT_KEY
from tables.engine.storage import file_status, recorded_location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def digest(parts: Iterable[str]) -> str:
    """The fingerprint of a set of descriptions: order does not matter."""
    joined = "\n".join(sorted(parts))
    return hashlib.sha256(joined.encode("utf-8", "surrogateescape")).hexdigest()[:32]


#: Each file of a batch -> (size in bytes, modification time in ms), or None if it is gone.
FileStatuses = dict[str, tuple[int, int] | None]


def file_statuses(spark: SparkSession, files: Iterable[str]) -> FileStatuses:
    """Each file's size and modification time (ms), None for a file that is gone."""
    return {name: file_status(spark, recorded_location(name)) for name in files}


def files_fingerprint(statuses: FileStatuses) -> str | None:
    """The fingerprint of the files a micro-batch reads, or None if one cannot be described.

    The files come from the batch's plan (`inputFiles`, no Spark job) and are described by
    `tables.engine.storage.file_status`. A file that cannot be described (gone) gives None.
    """
    if not statuses or any(found is None for found in statuses.values()):
        return None
    return digest(f"{name}\t{found[0]}\t{found[1]}" for name, found in statuses.items() if found)


def offsets_fingerprint(offsets: Mapping[str, Any]) -> str:
    """The fingerprint of Kafka offset ranges (topic -> partition -> [first, last])."""
    return digest([json.dumps(offsets, sort_keys=True, separators=(",", ":"))])


def with_fingerprint(record: Mapping[str, Any], fingerprint: str | None) -> dict[str, Any]:
    """The source record with its fingerprint, when there is one."""
    return {**record, FINGERPRINT_KEY: fingerprint} if fingerprint else dict(record)
