"""One app id writing into one table through one session, and what it learns between commits.

The exactly-once commit (`ingest.commit`), its audit (`quality.audit`), a replay and the stream
runner take a writer; each run makes one per table and app id, and what the writer keeps lives
and ends with it:
- the high-water mark: the highest batch id the app has rows of (`high_water`);
- the key ranges known per table version (`key_range.KeyRanges`);
- the session clone each thread commits through (`tables.engine.clones.SessionClones`);
- the state rebuild started after a commit for the next one (`state_rebuild.NextStateRebuild`),
  which the run ends with `close`.
Nothing here is module state: two runs in one process share nothing they did not pass.

Each cache is a speed device that `SpeedDevices` can switch off, for `make bench` to measure
what it saves (docs/benchmarks.md, "Speed devices"); production runs keep them all on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tables.delta.high_water import HighWater
from tables.delta.key_range import KeyRanges
from tables.delta.state_rebuild import NextStateRebuild
from tables.engine.clones import SessionClones
from tables.identifiers import validate_app_id

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tables.spec import TableSpec


@dataclass(frozen=True)
class SpeedDevices:
    """The writer's speed devices, all on unless `make bench` measures one switched off.

    - `key_range`: the table's key range known from the writer's own commits, which settles a
      batch's duplicate audit without a Spark job (`key_range.KeyRanges`);
    - `blind_append`: under `batch` dedup a batch above the app's high-water mark commits as
      Delta's idempotent append instead of a MERGE (`high_water.HighWater`);
    - `kept_clones`: one session clone per thread kept from commit to commit, instead of one per
      commit (`tables.engine.clones.SessionClones`; a clone per commit also stays in the JVM);
    - `one_task`: a small batch classified, counted and written by one task, in one stage
      (`ingest.decisions.is_one_task_batch`);
    - `next_state`: a stream that idles after a commit rebuilds the state of the version it made
      meanwhile, for the next batch, instead of in the next batch's commit
      (`tables.delta.state_rebuild.NextStateRebuild`).
    """

    key_range: bool = True
    blind_append: bool = True
    kept_clones: bool = True
    one_task: bool = True
    next_state: bool = True


@dataclass
class TableWriter:
    """An app id's writes into a table: the session, the spec, and the writer's own caches."""

    spark: SparkSession
    spec: TableSpec
    app_id: str
    key_ranges: KeyRanges = field(default_factory=KeyRanges, repr=False)
    marks: HighWater = field(default_factory=HighWater, repr=False)
    clones: SessionClones = field(default_factory=SessionClones, repr=False)
    devices: SpeedDevices = field(default_factory=SpeedDevices)
    next_state: NextStateRebuild = field(default_factory=NextStateRebuild, repr=False)

    def __post_init__(self) -> None:
        validate_app_id(self.app_id)
        self.key_ranges.enabled = self.key_ranges.enabled and self.devices.key_range
        self.clones.keep = self.clones.keep and self.devices.kept_clones
        self.next_state.enabled = self.next_state.enabled and self.devices.next_state

    @property
    def table(self) -> str:
        """The target table's name."""
        return self.spec.name

    def high_water(self) -> int | None:
        """The highest batch id the app has rows of in the table (read once per writer)."""
        return self.marks.read(self.spark, self.spec.name, self.app_id)

    def raise_high_water(self, batch_id: int) -> None:
        """Note that the app now has rows of `batch_id` in the table."""
        self.marks.raise_to(self.spec.name, self.app_id, batch_id)

    def on(self, spark: SparkSession) -> TableWriter:
        """The same writer (its caches) through another wrapper of its session.

        A classic `foreachBatch` hands each batch its session anew; the caches stay the run's.
        """
        if spark is self.spark:
            return self
        return TableWriter(
            spark,
            self.spec,
            self.app_id,
            self.key_ranges,
            self.marks,
            self.clones,
            self.devices,
            self.next_state,
        )
