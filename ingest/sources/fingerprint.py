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
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from ingest.decisions import FINGERPRINT_KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def digest(parts: Iterable[str]) -> str:
    """The fingerprint of a set of descriptions: order does not matter."""
    joined = "\n".join(sorted(parts))
    return hashlib.sha256(joined.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def files_fingerprint(spark: SparkSession, batch: DataFrame) -> str | None:
    """The fingerprint of the files a micro-batch reads, or None if one cannot be described.

    The files come from the batch's plan (`inputFiles`, no Spark job). Local files are described
    with `os.stat`; files on another store through Hadoop's file system, which needs a classic
    session. A file that cannot be described (gone, or no way to reach its store) gives None.
    """
    files = batch.inputFiles()
    if not files:
        return None
    described = [_describe(spark, name) for name in files]
    if any(d is None for d in described):
        return None
    return digest(d for d in described if d is not None)


def offsets_fingerprint(offsets: Mapping[str, Any]) -> str:
    """The fingerprint of Kafka offset ranges (topic -> partition -> [first, last])."""
    return digest([json.dumps(offsets, sort_keys=True, separators=(",", ":"))])


def with_fingerprint(record: Mapping[str, Any], fingerprint: str | None) -> dict[str, Any]:
    """The source record with its fingerprint, when there is one."""
    return {**record, FINGERPRINT_KEY: fingerprint} if fingerprint else dict(record)


def _describe(spark: SparkSession, name: str) -> str | None:
    parsed = urlparse(name)
    if parsed.scheme in ("", "file"):
        try:
            found = os.stat(unquote(parsed.path) if parsed.scheme else name)
        except OSError:
            return None
        return f"{name}\t{found.st_size}\t{found.st_mtime_ns // 1_000_000}"
    try:
        from tables.identifiers import file_of_recorded_path
        from tables.session import hadoop_path

        fs, path = hadoop_path(spark, file_of_recorded_path(name))
        status = fs.getFileStatus(path)
    except Exception:
        return None
    return f"{name}\t{status.getLen()}\t{status.getModificationTime()}"
