"""What a table declares about the records it accepts: their size limit and how epochs are read.

Grouped in one value (`RecordRules`), carried by the table's spec and handed to the readers, so
that a file line, a Kafka value and a replayed record meet the same rules. docs/records.md
states the limits and what becomes of a record past them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

from tables.errors import ConfigError
from tables.identifiers import shorten

#: The unit of epoch numbers sent for TIMESTAMP columns, when a source sends them on purpose.
TimestampUnit = Literal["seconds", "milliseconds", "microseconds"]

MIB = 1024 * 1024
#: A record up to this size lands (Spark's JSON parser itself stops at 20,000,000 characters
#: per string value, `quality.rescue.MAX_STRING_LENGTH`).
DEFAULT_MAX_RECORD_BYTES = 16 * MIB
#: The bounds a config may set: below 1 KiB a quarantined record's first bytes are the whole of
#: it; above 128 MiB one record would take a large share of a default driver's memory.
MIN_RECORD_BYTES = 1024
MAX_RECORD_BYTES = 128 * MIB
#: How much of a record past the limit is kept in quarantine (`_lh_raw`), in characters.
HEAD_CHARACTERS = 1024

_UNITS = MappingProxyType(
    {"B": 1, "KB": 1000, "KIB": 1024, "MB": 1000**2, "MIB": MIB, "GB": 1000**3, "GIB": 1024**3}
)


@dataclass(frozen=True)
class RecordRules:
    """The limits and conversions a table applies to every incoming record.

    `max_record_bytes`: a record (a JSON line, a Kafka value, a CSV record) longer than this,
    in bytes, is quarantined with its size and first characters, never parsed, and a file line
    past it is never read into memory. `timestamp_unit`: epoch numbers in TIMESTAMP columns are
    read in this unit; without it a number in a TIMESTAMP or DATE column is quarantined (Spark
    would read it as seconds, and a sender may have meant milliseconds).
    """

    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    timestamp_unit: TimestampUnit | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_record_bytes, bool) or not isinstance(self.max_record_bytes, int):
            raise ConfigError(
                f"max_record_bytes must be a number of bytes, got {shorten(self.max_record_bytes)}",
                key="max_record_bytes",
            )
        if not MIN_RECORD_BYTES <= self.max_record_bytes <= MAX_RECORD_BYTES:
            raise ConfigError(
                f"max_record_bytes must lie between {MIN_RECORD_BYTES:,} bytes (1 KiB) and "
                f"{MAX_RECORD_BYTES:,} bytes (128 MiB), got {self.max_record_bytes:,}",
                key="max_record_bytes",
            )
        if self.timestamp_unit is not None and self.timestamp_unit not in get_args(TimestampUnit):
            raise ConfigError(
                f"timestamp_unit must be one of {get_args(TimestampUnit)}, "
                f"got {shorten(self.timestamp_unit)}",
                key="timestamp_unit",
            )


def parse_size(value: object) -> int:
    """A byte count from an integer or a string such as `"16 MiB"` or `"500kB"`.

    ValueError names what was wrong; the config loader adds the file and key.
    """
    if isinstance(value, bool):
        raise ValueError(f'expected a size such as 16777216 or "16 MiB", got {value}')
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise ValueError(f'expected a size such as 16777216 or "16 MiB", got {shorten(value)}')
    text = value.strip().replace(" ", "").upper()
    digits = text.rstrip("BKMGI")
    unit = text[len(digits) :] or "B"
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(
            f'expected a size such as 16777216 or "16 MiB" (units B, KB, KiB, MB, MiB, GB, '
            f"GiB), got {shorten(value)}"
        )
    return int(digits) * _UNITS[unit]
