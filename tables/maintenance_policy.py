"""When a long run compacts and vacuums its table (`[tables.X.maintenance]`): pure decisions.

A stream commits one small file (or a few) per batch; after weeks the table is thousands of
files, every read lists them all, and the removed ones stay on storage until a VACUUM. The run
itself does the upkeep between batches, under its checkpoint's lock (`ingest.maintenance`), when
these predicates say so. All counts are of batch ids, so a restarted run keeps the same rhythm.
Off by default: every setting 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from tables.errors import ConfigError


@dataclass(frozen=True)
class MaintenancePolicy:
    """How often a run compacts (OPTIMIZE) and vacuums its table; 0 turns a rule off.

    `optimize_every`: after every N-th batch. `optimize_max_files`: after a batch that leaves the
    table with more than K files above what the run's last compaction left (reads the table's
    detail after each batch). `vacuum_every`:
    after every N-th batch, with the table's own retention, never below the replay window.
    """

    optimize_every: int = 0
    optimize_max_files: int = 0
    vacuum_every: int = 0

    def __post_init__(self) -> None:
        for name in ("optimize_every", "optimize_max_files", "vacuum_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"maintenance {name} must be a whole number >= 0, got {value!r}")

    @property
    def is_on(self) -> bool:
        """True if any rule is set."""
        return bool(self.optimize_every or self.optimize_max_files or self.vacuum_every)

    @property
    def watches_files(self) -> bool:
        """True if a batch's end must count the table's files."""
        return self.optimize_max_files > 0


def is_every_nth(batch_id: int, every: int) -> bool:
    """True after the every-th batch (ids 0-based: batch every-1, 2*every-1, ...); never for 0."""
    return every > 0 and (batch_id + 1) % every == 0


def should_optimize(policy: MaintenancePolicy, batch_id: int, added_files: int) -> bool:
    """True if the table is due a compaction after `batch_id`, `added_files` files more than
    the run's last compaction left."""
    if is_every_nth(batch_id, policy.optimize_every):
        return True
    limit = policy.optimize_max_files
    return limit > 0 and added_files > limit


def should_vacuum(policy: MaintenancePolicy, batch_id: int) -> bool:
    """True if the table is due a VACUUM after `batch_id`."""
    return is_every_nth(batch_id, policy.vacuum_every)


#: A quarantine or quality table with more files than this is compacted at its table's optimize
#: turn: both grow by a file for some batches (rejects, an outcomes append), and compacting one of
#: a few files would rewrite it at every turn for nothing.
COMPANION_FILES_FLOOR = 8


def should_compact_companion(policy: MaintenancePolicy, batch_id: int, files: int) -> bool:
    """True if a table's quarantine or quality table is due a compaction after `batch_id`: at
    the table's every-N turn, once it holds more than `COMPANION_FILES_FLOOR` files."""
    return is_every_nth(batch_id, policy.optimize_every) and files > COMPANION_FILES_FLOOR
