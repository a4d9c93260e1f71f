"""What a batch's source record says about the batch: how much it covered, bytes, freshness.

The ledger record of a file batch names its files; their sizes and modification times give the
batch's bytes and its lag (how long ago its newest file landed). A Kafka batch records its offset
ranges: their count is known, its bytes and the topic's end offsets are not (asking the broker
per batch would cost a round trip), so bytes and lag are left out for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tables.delta.ledger import recorded_offsets
from tables.engine.storage import file_status, local_path, recorded_location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class SourceFacts:
    """How much of its source a batch covered, its bytes and its newest file's time, if known."""

    unit: str
    count: int
    bytes: int | None = None
    newest_modified: float | None = None
    """Epoch seconds of the newest file's modification time (file batches only)."""


def source_units(recorded: Mapping[str, Any]) -> tuple[str, int]:
    """The unit a source record counts in (`files` or `offsets`) and how many it names."""
    offsets = recorded_offsets(recorded)
    if offsets is not None:
        return "offsets", sum(
            int(bounds[1]) - int(bounds[0]) + 1
            for partitions in offsets.values()
            for bounds in partitions.values()
        )
    files = recorded.get("files")
    return "files", len(files) if isinstance(files, list) else 0


def lag_seconds(now: float, newest_modified: float | None) -> float | None:
    """Seconds from the newest file's modification to `now` (never negative), if known."""
    if newest_modified is None:
        return None
    return max(0.0, round(now - newest_modified, 3))


def source_facts(spark: SparkSession | None, recorded: Mapping[str, Any]) -> SourceFacts:
    """The facts of a batch's source record; files are looked at (a file gone leaves them out)."""
    unit, count = source_units(recorded)
    files = recorded.get("files")
    if unit != "files" or not isinstance(files, list) or not files:
        return SourceFacts(unit, count)
    described = [_size_and_time(spark, str(name)) for name in files]
    if any(d is None for d in described):
        return SourceFacts(unit, count)
    known = [d for d in described if d is not None]
    return SourceFacts(
        unit, count, sum(size for size, _ in known), max(modified for _, modified in known)
    )


def _size_and_time(spark: SparkSession | None, name: str) -> tuple[int, float] | None:
    """A recorded file's size and modification time (seconds); None if it cannot be had."""

    location = recorded_location(name)
    if spark is None and local_path(location) is None:
        return None
    found = file_status(spark, location)  # type: ignore[arg-type]  # local paths need no session
    return None if found is None else (found[0], found[1] / 1000)
