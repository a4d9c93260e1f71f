"""Objects written on condition on S3 (`s3a://`): created only if absent, replaced only if
unchanged, through S3A's conditional create (hadoop-aws 3.4.2, `If-None-Match` / `If-Match`).
Deleting one is `tables.engine.storage.delete`, as for any file.

A checkpoint's lease (`ingest.checkpoint_lease`) is such an object: the local lock of a
checkpoint directory does not reach S3, and a conditional PUT gives the same mutual exclusion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tables.engine.jvm.conditions import java_class_names
from tables.engine.jvm.files import file_system

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_IF_NONE_MATCH = "fs.option.create.conditional.overwrite"
_IF_MATCH = "fs.option.create.conditional.overwrite.etag"
#: What S3A raises for 412 Precondition Failed (and Hadoop for an existing file).
_PRECONDITION_FAILED = frozenset(
    {
        "org.apache.hadoop.fs.s3a.RemoteFileChangedException",
        "org.apache.hadoop.fs.FileAlreadyExistsException",
    }
)


@dataclass(frozen=True)
class StoredObject:
    """An object's content and its entity tag (what a conditional replace names)."""

    content: bytes
    etag: str


def read_object(spark: SparkSession, location: str) -> StoredObject | None:
    """The object at `location` with its entity tag; None if there is none."""
    fs, path = file_system(spark, location, f"reading {location}")
    if not fs.exists(path):
        return None
    found = fs.getFileStatus(path)
    stream = fs.open(path)
    try:
        content = bytes(stream.readAllBytes())
    finally:
        stream.close()
    return StoredObject(content, str(found.getEtag()))


def put_object(
    spark: SparkSession, location: str, content: bytes, replacing: str | None = None
) -> str | None:
    """Write `content` at `location` only if no object is there (or, with `replacing`, only if
    the object there still has that entity tag); its new entity tag, or None if the condition
    failed (another writer's object is there)."""
    fs, path = file_system(spark, location, f"writing {location}")
    builder = fs.createFile(path).overwrite(replacing is not None)
    if replacing is None:
        builder = builder.must(_IF_NONE_MATCH, True)
    else:
        builder = builder.must(_IF_MATCH, replacing)
    try:
        stream = builder.build()
        stream.write(bytearray(content))
        stream.close()
    except Exception as exc:
        if java_class_names(exc) & _PRECONDITION_FAILED:
            return None
        raise
    return str(fs.getFileStatus(path).getEtag())
