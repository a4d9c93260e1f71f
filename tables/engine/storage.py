"""Small file operations on the lakehouse's stores: checkpoints, landing directories, markers.

A local path (or a `file:` URI) is handled by Python itself, on a classic session or over Spark
Connect alike (a Connect server started by `lakehouse serve` shares the machine). Any other store
is reached through the session: a classic session's Hadoop file system (`tables.engine.jvm.files`),
or over Spark Connect what Spark's own readers can tell (whether a path exists, a file's size and
modification time); writing or deleting a file on a remote store needs a classic session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from tables.engine.jvm import files, gateway, is_classic
from tables.engine.jvm.conditions import has_condition
from tables.identifiers import file_of_recorded_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_path(location: str) -> Path | None:
    """The local path of a plain path or a `file:` URI; None for any other store."""
    parsed = urlparse(location)
    if parsed.scheme == "":
        return Path(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return None


def recorded_location(recorded: str) -> str:
    """The location this module takes for a file Spark recorded (`_metadata.file_path`).

    Spark records a URI, URL-encoded. A `file:` URI is taken as it is (`local_path` decodes it);
    any other is decoded once into the Hadoop path string the JVM quotes again itself.
    """

    return recorded if local_path(recorded) is not None else file_of_recorded_path(recorded)


def exists(spark: SparkSession, location: str) -> bool:
    """True if a file or directory is at `location`."""
    local = local_path(location)
    if local is not None:
        return local.exists()
    if is_classic(spark):
        return files.exists(spark, location)
    try:
        spark.read.format("binaryFile").load(location).schema  # noqa: B018 (resolves the path)
    except Exception as exc:
        if has_condition(exc, "PATH_NOT_FOUND"):
            return False
        raise
    return True


def file_status(spark: SparkSession, location: str) -> tuple[int, int] | None:
    """A file's size in bytes and modification time in ms; None if there is no such file."""
    local = local_path(location)
    if local is not None:
        try:
            found = local.stat()
        except OSError:
            return None
        return (found.st_size, found.st_mtime_ns // 1_000_000) if local.is_file() else None
    if is_classic(spark):
        return files.status(spark, location)
    rows = _binary_files(spark, location, "length", "modificationTime")
    if rows is None or len(rows) != 1:
        return None
    return int(rows[0]["length"]), int(rows[0]["modificationTime"].timestamp() * 1000)


def child_names(spark: SparkSession, directory: str) -> list[str]:
    """The names of a directory's entries; empty if it does not exist.

    Hidden entries are included, except over Spark Connect on a remote store, where Spark's file
    listing leaves them out.
    """
    local = local_path(directory)
    if local is not None:
        return sorted(os.listdir(local)) if local.is_dir() else []
    if is_classic(spark):
        entries = files.children(spark, directory)
        return sorted(uri.rstrip("/").rsplit("/", 1)[-1] for uri, _ in entries)
    # Over Spark Connect, Spark's file listing: files only, hidden ones (`.x`, `_x`) left out.
    paths = _binary_files(spark, directory, "path") or []
    return sorted(str(row["path"]).rstrip("/").rsplit("/", 1)[-1] for row in paths)


def walk_files(spark: SparkSession, directory: str) -> list[str]:
    """Every file under a directory (hidden ones included), as paths or URIs, sorted."""
    local = local_path(directory)
    if local is not None:
        return sorted(
            os.path.join(root, name) for root, _, names in os.walk(local) for name in names
        )
    gateway(spark, f"listing {directory}")

    found: list[str] = []
    pending = [directory]
    while pending:
        for uri, is_directory in files.children(spark, pending.pop()):
            (pending if is_directory else found).append(uri)
    return sorted(found)


def read_bytes(spark: SparkSession, location: str) -> bytes | None:
    """A small file's bytes, or None if there is no file."""
    local = local_path(location)
    if local is not None:
        return local.read_bytes() if local.is_file() else None
    gateway(spark, f"reading {location}")

    return files.read_bytes(spark, location)


def write_bytes(spark: SparkSession, location: str, data: bytes) -> None:
    """Write a small file, replacing it (its directory is created)."""
    local = local_path(location)
    if local is not None:
        local.parent.mkdir(parents=True, exist_ok=True)
        staging = local.with_name(f".{local.name}.{os.getpid()}.tmp")
        staging.write_bytes(data)
        staging.replace(local)
        return
    gateway(spark, f"writing {location}")

    files.write_bytes(spark, location, data)


def delete(spark: SparkSession, location: str) -> None:
    """Delete a file; nothing if it is gone."""
    local = local_path(location)
    if local is not None:
        local.unlink(missing_ok=True)
        return
    gateway(spark, f"deleting {location}")

    files.delete(spark, location)


def _binary_files(spark: SparkSession, location: str, *columns: str) -> list[Any] | None:
    """Columns of Spark's `binaryFile` listing of `location` in one query; None if none there."""
    try:
        return spark.read.format("binaryFile").load(location).select(*columns).collect()
    except Exception as exc:
        if has_condition(exc, "PATH_NOT_FOUND"):
            return None
        raise
