"""Lines too long to read: found before the read, quarantined by their size and first bytes.

Spark's text reader holds a whole line in memory before anything can look at it: one line of a
gigabyte kills the JVM, and the file is then met again at every restart. So before a batch of
JSON files is read, each file that could hold a line past the table's `max_record_bytes` (one
larger than the limit, or compressed, whose lines its size does not bound) is scanned by
`tables/engine/java/LineScan.java` in a Spark job, one task per file, streaming, never holding a
line. A file with such lines is read from a copy without them (under `<home>/tmp/long-lines/`, made
by a second scan), and each long line becomes one quarantine row: its size, its line number and its
first characters. Files no larger than the limit cost nothing: their lines are bounded by their
size.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    RECORD_COLUMN,
    SOURCE_FILE_COLUMN,
)
from tables.engine.confs import HOME_CONF
from tables.engine.storage import delete, local_path
from tables.record_rules import HEAD_CHARACTERS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_SCAN_CLASS = "lakehouse.LineScan"
#: Extensions of Hadoop's codecs, which Spark's text reader decompresses by file name.
COMPRESSED_EXTENSIONS = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")
LONG_LINES_DIR = "tmp/long-lines"


@dataclass(frozen=True)
class LongLine:
    """One line past the limit: its file, line number (from 1), byte offset, size, first bytes."""

    file: str
    line: int
    offset: int
    size: int
    head: bytes

    def reason(self, max_record_bytes: int) -> str:
        """Its quarantine reason."""
        return (
            f"record too large: {self.size:,} bytes (line {self.line:,} of its file), over the "
            f"table's max_record_bytes ({max_record_bytes:,}); _lh_raw holds its first "
            f"{HEAD_CHARACTERS:,} characters"
        )

    @property
    def head_text(self) -> str:
        """Its first characters, as `_lh_raw` holds them (bytes not UTF-8 shown as U+FFFD)."""
        return self.head.decode("utf-8", "replace")[:HEAD_CHARACTERS]


def is_suspect(name: str, size: int | None, max_record_bytes: int) -> bool:
    """True if a file may hold a line past the limit: larger than it, compressed, or unknown."""
    if size is None or size > max_record_bytes:
        return True
    return name.lower().endswith(COMPRESSED_EXTENSIONS)


def parse_scan(file: str, answer: str | None) -> list[LongLine]:
    """The long lines one scan reported, named as Spark records their file; None is an error."""
    if answer is None:
        raise RuntimeError(f"the line scan of {file} returned nothing")
    found = json.loads(answer)
    recorded = recorded_form(str(found["path"]))
    return [
        LongLine(recorded, e["line"], e["offset"], e["bytes"], base64.b64decode(e["head"]))
        for e in found["long"]
    ]


def scan_long_lines(
    spark: SparkSession, files: Sequence[str], max_record_bytes: int, line_sep: str | None
) -> dict[str, list[LongLine]]:
    """The long lines of each file (a Spark job, one task per file); files without any left out.

    `files` are Hadoop path strings (not URL-encoded); each line names its file as Spark's
    `_metadata.file_path` would.
    """
    frame = spark.createDataFrame([(f,) for f in files], "path STRING").repartition(len(files))
    answers = frame.select(
        "path",
        F.call_function(
            "java_method",
            F.lit(_SCAN_CLASS),
            F.lit("oversized"),
            F.col("path"),
            F.lit(max_record_bytes).cast("bigint"),
            F.lit(line_sep or ""),
        ).alias("found"),
    ).collect()
    found = {r["path"]: parse_scan(r["path"], r["found"]) for r in answers}
    return {path: lines for path, lines in found.items() if lines}


def copy_without(
    spark: SparkSession, copies: Mapping[str, str], max_record_bytes: int, line_sep: str | None
) -> None:
    """Copy each file (key) to its target (value) without its long lines (one task per file)."""
    frame = spark.createDataFrame(list(copies.items()), "path STRING, target STRING")
    frame.repartition(len(copies)).select(
        F.call_function(
            "java_method",
            F.lit(_SCAN_CLASS),
            F.lit("copyWithout"),
            F.col("path"),
            F.col("target"),
            F.lit(max_record_bytes).cast("bigint"),
            F.lit(line_sep or ""),
        )
    ).collect()


def copies_root(spark: SparkSession) -> str:
    """Where copies without long lines are kept: `<home>/tmp/long-lines`."""
    home = spark.conf.get(HOME_CONF, None)
    if not home:
        raise RuntimeError("the session has no lakehouse home to keep copies of files under")
    root = home.rstrip("/")
    return f"{root}/{LONG_LINES_DIR}"


def copy_location(root: str, file: str, size: int | None, modified: int | None) -> str:
    """A file's copy: a directory named by the file and its version, holding `data.json`."""
    key = hashlib.sha256(f"{file}\t{size}\t{modified}".encode()).hexdigest()[:24]
    return f"{root}/{key}/data.json"


def remove_copies(spark: SparkSession, locations: Sequence[str]) -> None:
    """Remove copies made for a batch, once it is done with them (their directories too)."""
    for location in locations:
        directory = location.rsplit("/", 1)[0]
        local = local_path(directory)
        if local is not None:
            shutil.rmtree(local, ignore_errors=True)
        else:
            delete(spark, location)


def long_line_rows(
    spark: SparkSession, like: DataFrame, lines: Sequence[LongLine], limit: int
) -> DataFrame:
    """One quarantine-bound row per long line, with the columns of `like` (the read batch)."""
    names = like.columns
    rows = []
    for line in lines:
        values = dict.fromkeys(names)
        values[CORRUPT_COLUMN] = line.head_text
        values[RECORD_COLUMN] = line.head_text
        values[FAULT_COLUMN] = line.reason(limit)
        values[SOURCE_FILE_COLUMN] = line.file
        rows.append(tuple(values[n] for n in names))
    return spark.createDataFrame(rows, like.schema)


def as_uri(location: str) -> str:
    """A plain local path as a `file:` URI (Hadoop paths elsewhere are taken as they are)."""
    local = local_path(location)
    if local is None or ":" in location.split("/", 1)[0]:
        return location
    return local.resolve().as_uri()


def recorded_form(uri: str) -> str:
    """A file URI as Spark's `_metadata.file_path` writes it (`file:/...` for a local file).

    Hadoop's qualified paths and Spark's source log write a local file `file:///...`.
    """
    return "file:/" + uri[len("file:///") :] if uri.startswith("file:///") else uri
