"""Offset algebra of Kafka sources, pure: ranges a batch covered, where to resume, gaps.

- `next_offsets(ledger ranges)` turns recorded ranges into Spark's `startingOffsets` JSON (one
  past the last offset landed per partition), for restarting a stream whose checkpoint is lost
  from what the table itself says it holds.
- `gaps` / `are_contiguous` check that consecutive batches' ranges neither skip nor repeat
  offsets. Rows are what is recorded, so offsets that hold no record (transaction markers of a
  transactional producer, records removed by compaction) show up as gaps.
- `validate_starting_offsets` checks a `startingOffsets` setting before the connector sees it.

Nothing here needs Spark or a broker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tables.errors import ConfigError

#: topic -> partition (as a string, as in JSON) -> [first offset, last offset], both inclusive.
OffsetRanges = dict[str, dict[str, list[int]]]


def validate_starting_offsets(text: str) -> None:
    """Raise ConfigError unless `text` is `earliest`, `latest` or Spark's per-partition JSON."""
    if text in ("earliest", "latest"):
        return
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    valid = isinstance(parsed, dict) and all(
        isinstance(partitions, dict)
        and all(
            isinstance(offset, int) and not isinstance(offset, bool) and offset >= -2
            for offset in partitions.values()
        )
        for partitions in parsed.values()
    )
    if not valid:
        raise ConfigError(
            "starting_offsets must be 'earliest', 'latest' or JSON such as "
            '{"topic": {"0": 42}} (-2 = earliest, -1 = latest)'
        )


def merge_ranges(batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]]) -> OffsetRanges:
    """Several batches' ranges as one: per partition, the smallest first and largest last."""
    merged: OffsetRanges = {}
    for ranges in batches:
        for topic, partitions in checked_ranges(ranges).items():
            for partition, (first, last) in partitions.items():
                known = merged.setdefault(topic, {}).get(partition)
                merged[topic][partition] = (
                    [first, last] if known is None else [min(known[0], first), max(known[1], last)]
                )
    return merged


def next_offsets(
    batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]],
    *,
    partitions: Mapping[str, Iterable[int]] | None = None,
) -> str:
    """Spark `startingOffsets` JSON resuming after the recorded ranges: last offset + 1.

    `batches` are the ranges of the ledger's batches, in any order. Spark needs an offset for
    every partition of a topic named in the JSON: `partitions` (topic -> partition numbers)
    adds those that no batch covered, at -2 (earliest).
    """
    merged = merge_ranges(batches)
    if not merged:
        raise ValueError("no recorded offset ranges to resume after")
    offsets: dict[str, dict[str, int]] = {
        topic: {p: bounds[1] + 1 for p, bounds in parts.items()} for topic, parts in merged.items()
    }
    for topic, numbers in (partitions or {}).items():
        for number in numbers:
            offsets.setdefault(topic, {}).setdefault(str(number), -2)
    return json.dumps(
        {t: dict(sorted(p.items(), key=lambda kv: int(kv[0]))) for t, p in sorted(offsets.items())},
        separators=(",", ":"),
    )


@dataclass(frozen=True)
class RangeProblem:
    """Offsets of one partition that consecutive batches skipped (gap) or read twice (overlap)."""

    topic: str
    partition: str
    kind: Literal["gap", "overlap"]
    batch: int  # position of the later batch in the checked sequence
    expected_first: int  # the earlier batch's last offset + 1
    actual_first: int

    def __str__(self) -> str:
        if self.kind == "gap":
            what = f"offsets {self.expected_first}-{self.actual_first - 1} were skipped"
        else:
            what = f"offsets {self.actual_first}-{self.expected_first - 1} were read again"
        return f"{self.topic} partition {self.partition}, batch #{self.batch}: {what}"


def gaps(batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]]) -> list[RangeProblem]:
    """Where consecutive batches' ranges (in batch order) do not meet, per partition.

    A batch that holds no rows of a partition is passed over: the next batch that does must
    start right after the last one that did.
    """
    last_seen: dict[tuple[str, str], int] = {}
    problems: list[RangeProblem] = []
    for position, ranges in enumerate(batches):
        for topic, partitions in sorted(checked_ranges(ranges).items()):
            for partition, (first, last) in sorted(partitions.items()):
                previous = last_seen.get((topic, partition))
                if previous is not None and first != previous + 1:
                    kind: Literal["gap", "overlap"] = "gap" if first > previous + 1 else "overlap"
                    problems.append(
                        RangeProblem(topic, partition, kind, position, previous + 1, first)
                    )
                last_seen[(topic, partition)] = max(
                    last, previous if previous is not None else last
                )
    return problems


def are_contiguous(batches: Iterable[Mapping[str, Mapping[str, Sequence[int]]]]) -> bool:
    """True if, per partition, each batch starts right after the previous batch's last offset."""
    return not gaps(batches)


def checked_ranges(ranges: Mapping[str, Mapping[str, Sequence[int]]]) -> OffsetRanges:
    checked: OffsetRanges = {}
    for topic, partitions in ranges.items():
        for partition, bounds in partitions.items():
            if (
                len(bounds) != 2
                or not all(isinstance(b, int) and b >= 0 for b in bounds)
                or bounds[0] > bounds[1]
                or not str(partition).isdigit()
            ):
                raise ConfigError(
                    f"bad offset range for {topic} partition {partition}: {list(bounds)!r} "
                    "(want [first, last] with 0 <= first <= last)"
                )
            checked.setdefault(str(topic), {})[str(partition)] = [int(bounds[0]), int(bounds[1])]
    return checked
