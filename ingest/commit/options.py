"""What a caller says about one batch's commit, grouped in one value (`CommitOptions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quality.expectations import ExpectationGate


@dataclass(frozen=True)
class CommitOptions:
    """How a batch arrived and how its commit behaves.

    `source` describes where the batch came from (merged into the ledger entry); `raw_format`
    and `reader_options` say how a corrupt record's text was read, so its quarantine reason can
    name the fault; `gate` validates the batch against the table's expectation suite. With
    `fail_on_rewind` a batch id below the log's marker raises CheckpointLostError instead of
    being skipped (a stream's lost or rewound checkpoint); `max_attempts` bounds the retries of
    transient failures.
    """

    source: Mapping[str, Any] | None = None
    raw_format: str | None = None
    reader_options: Mapping[str, str] | None = None
    gate: ExpectationGate | None = None
    fail_on_rewind: bool = False
    max_attempts: int = 5

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts!r}")
