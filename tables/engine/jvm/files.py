"""Files on any store Hadoop reaches (`s3a://`, `abfss://`, `hdfs://`), through the driver JVM.

Python reaches local files itself (`tables.engine.storage` does so); other stores are reached
through the session's Hadoop FileSystem, configured with the session's credentials and settings,
which only the JVM holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tables.engine.jvm import gateway, hadoop_configuration

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def file_system(spark: SparkSession, location: str, operation: str) -> tuple[Any, Any]:
    """The session's Hadoop FileSystem for `location`, and the location as a Hadoop Path."""
    path = gateway(spark, operation).org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(hadoop_configuration(spark, operation)), path


def exists(spark: SparkSession, location: str) -> bool:
    """True if a file or directory is at `location`."""
    fs, path = file_system(spark, location, f"checking {location}")
    return bool(fs.exists(path))


def status(spark: SparkSession, location: str) -> tuple[int, int] | None:
    """A file's size in bytes and modification time in ms since the epoch; None if no file."""
    fs, path = file_system(spark, location, f"reading the status of {location}")
    if not fs.exists(path):
        return None
    found = fs.getFileStatus(path)
    if not found.isFile():
        return None
    return int(found.getLen()), int(found.getModificationTime())


def children(spark: SparkSession, directory: str) -> list[tuple[str, bool]]:
    """Each entry of a directory as (URI, is a directory); empty if there is no such directory."""
    fs, path = file_system(spark, directory, f"listing {directory}")
    if not fs.exists(path):
        return []
    return [
        (str(entry.getPath().toString()), bool(entry.isDirectory()))
        for entry in fs.listStatus(path)
    ]


def read_bytes(spark: SparkSession, location: str) -> bytes | None:
    """A small file's bytes, or None if there is no file."""
    fs, path = file_system(spark, location, f"reading {location}")
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def write_bytes(spark: SparkSession, location: str, data: bytes) -> None:
    """Write a small file, replacing it."""
    fs, path = file_system(spark, location, f"writing {location}")
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()


def delete(spark: SparkSession, location: str) -> None:
    """Delete a file (nothing if it is gone)."""
    fs, path = file_system(spark, location, f"deleting {location}")
    fs.delete(path, False)


def request_counts(spark: SparkSession, location: str) -> dict[str, int]:
    """The store's request counters of the FileSystem that reaches `location` (S3A's
    IOStatistics: `object_put_request`, `object_list_request`, ...), summed over this JVM.

    In a local session the executors share the driver's FileSystem, so two readings taken around
    some work count every request it made; `make bench` divides them by the batches committed.
    Empty for a store that keeps no statistics.
    """
    fs, _ = file_system(spark, location, f"reading the request counters of {location}")
    statistics = fs.getIOStatistics()  # Hadoop's FileSystem default: null
    if statistics is None:
        return {}
    counters = statistics.counters()
    return {str(name): int(counters.get(name)) for name in counters.keySet()}
