"""How much a source holds beyond what an app's committed batches read: its backlog.

An available-now ingest draws it as a progress bar (`ingest.observe.progress`): files in the
landing directory that no batch of the app read yet, or Kafka offsets past the last one its
batches landed. It is measured against the ledger's source records (the files, the offset
ranges), which the log keeps with each batch, so it needs nothing of Spark's checkpoint format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ingest.sources.offsets import merge_ranges
from tables.engine.storage import local_path


@dataclass(frozen=True)
class Backlog:
    """What is pending, in the source's unit (`files` or `offsets`); None when not known."""

    unit: str
    pending: int | None


def normal_path(name: str) -> str:
    """A file name as a comparable path: `file:/x`, `file:///x` and `/x` are one file."""
    local = local_path(name)
    return name if local is None else str(local)


def files_pending(listed: Iterable[str], recorded: Iterable[str]) -> int:
    """How many listed files no recorded batch read."""
    done = {normal_path(name) for name in recorded}
    return len({normal_path(name) for name in listed} - done)


def offsets_pending(
    recorded: Sequence[Mapping[str, Mapping[str, Sequence[int]]]],
    available: Mapping[str, Mapping[str, Sequence[int]]],
    *,
    from_earliest: bool,
) -> int:
    """Offsets Kafka holds past the recorded ranges, summed over partitions.

    `available` is, per topic and partition, [earliest, next offset to be written]. A partition
    no batch read starts at its earliest offset, or at its end if the stream starts `latest`.
    """
    merged = merge_ranges(recorded)
    pending = 0
    for topic, partitions in available.items():
        for partition, (earliest, end) in partitions.items():
            bounds = merged.get(topic, {}).get(str(partition))
            start = bounds[1] + 1 if bounds is not None else (earliest if from_earliest else end)
            pending += max(0, end - max(start, earliest))
    return pending
