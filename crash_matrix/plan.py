"""The crash matrix's records, files, ledger and figures: what is landed and how it is checked."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

TABLE = "events"
QUARANTINE = f"{TABLE}_quarantine"
KEY = "event_id"
RAW_COLUMN = "_lh_raw"
APP_ID = "verify-landing"
PIPELINE = "landing"
ID_PATTERN = re.compile(r"\br\d{9}\b")
BATCH_LINE = re.compile(r"^batch (\d+): (committed|skipped|empty)\b")
MALFORMED_SHARE = 0.005
REPEAT_SHARE = 0.005
RESEND_SHARE = 0.01
STARTUP_KILL_SHARE = 0.15
CRASH_ACTIONS = ("kill", "term", "exit")
EXPECTED_EXIT = {"kill": -signal.SIGKILL, "term": -signal.SIGTERM, "exit": 137}
STATE_FILE = "harness.json"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIZES = ("records", "batch_size", "random_kills", "seed")
FULL = {"records": 100_000, "batch_size": 750, "random_kills": 200}
QUICK = {"records": 1_200, "batch_size": 200, "random_kills": 2}
#: The points `--quick` crashes at: the states between two writes (quarantine files written but
#: not committed, table files written but not committed, checkpoint written but next batch not
#: begun). The other points are crashed in-process by the unit tests and by the full run.
QUICK_POINTS = ("mid_quarantine", "before_commit", "after_checkpoint")
CONFIG = f"""\
# Written by the crash matrix: one file per batch, every resend matched against the table.
[lakehouse]
home = "home"

[tables.{TABLE}]
schema = "{KEY} STRING NOT NULL, user_id STRING, amount DOUBLE, seq BIGINT"
keys = ["{KEY}"]
dedup = "table"

[pipelines.{PIPELINE}]
table = "{TABLE}"
app_id = "{APP_ID}"
trigger = "available-now"

[pipelines.{PIPELINE}.source]
format = "json"
path = "landing"
max_files_per_trigger = 1
"""


@dataclass(frozen=True)
class Line:
    """One line of an input file and what the ledger says about it.

    `kind` is `valid` or `malformed` for a record's first line, `repeat` for a copy later in the
    same file and `resend` for a copy in a later file; copies must not land again.
    """

    record_id: str
    kind: str
    text: str


@dataclass(frozen=True)
class Ledger:
    """The ids the generator wrote, read back from its ledger file, split by where they belong."""

    valid: frozenset[str]
    malformed: frozenset[str]
    lines: int
    files: int

    @property
    def records(self) -> int:
        """Distinct records written, valid or not."""
        return len(self.valid | self.malformed)


@dataclass(frozen=True)
class Comparison:
    """The tables' ids set against the ledger's; every count but the first three must be 0.

    `duplicates` counts extra copies in the target, extra copies in the quarantine, and ids found
    in both; `misplaced` counts ids on the wrong side or unknown to the ledger; `unidentified`
    counts quarantine rows whose raw text names no single record id.
    """

    records: int
    landed: int
    quarantined: int
    duplicates: int
    losses: int
    misplaced: int
    unidentified: int


@dataclass
class Figures:
    """Everything one harness run measured, for the summary line and the JSON file."""

    records: int = 0
    files: int = 0
    point_faults: int = 0
    random_kills: int = 0
    sigterms: int = 0
    resumes: int = 0
    kills_after_write: int = 0
    restarts: int = 0
    landed: int = 0
    quarantined: int = 0
    duplicates: int = 0
    losses: int = 0
    misplaced: int = 0
    unidentified: int = 0
    marker: int | None = None
    last_batch: int = -1
    checkpoint_batch: int | None = None
    ledger_batches_ok: bool = False
    consumed: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    not_fired: list[str] = field(default_factory=list)

    @property
    def faults(self) -> int:
        """Faults injected: fault points that fired plus random kills."""
        return self.point_faults + self.random_kills

    @property
    def marker_ok(self) -> bool:
        """The log's marker, the checkpoint and the per-batch ledger all end at the last batch."""
        return (
            self.marker == self.last_batch == self.checkpoint_batch
            and self.ledger_batches_ok
            and self.last_batch >= 0
        )

    @property
    def ok(self) -> bool:
        """Exactly once: input consumed, nothing lost, nothing twice, nothing misplaced."""
        return (
            self.consumed
            and self.duplicates == 0
            and self.losses == 0
            and self.misplaced == 0
            and self.unidentified == 0
            and self.marker_ok
        )

    def as_json(self) -> dict[str, object]:
        """The figures plus the derived verdicts, for `--json`."""
        return {**asdict(self), "faults": self.faults, "marker_ok": self.marker_ok, "ok": self.ok}


def record_id(number: int) -> str:
    """The id of record `number`: recognisable in any raw text, e.g. r000000123."""
    return f"r{number:09d}"


def record_text(rng: random.Random, number: int) -> str:
    """A well-formed JSON line for record `number`."""
    row = {
        KEY: record_id(number),
        "user_id": f"u{rng.randrange(1000):04d}",
        "amount": round(rng.uniform(1, 500), 2),
        "seq": number,
    }
    return json.dumps(row, separators=(",", ":"))


def malformed_text(number: int) -> str:
    """A truncated JSON line that cannot parse but still names its record id in the raw text."""
    return f'{{"{KEY}": "{record_id(number)}", "amount": "not-a-number"'


def plan_files(records: int, batch_size: int, seed: int) -> list[list[Line]]:
    """The input: `batch_size` new records per file, some malformed, some lines sent twice.

    Every file of two or more records has at least one malformed line, so `mid_quarantine` fires
    at any batch; each file after the first resends exact copies of valid lines of earlier files.
    """
    if records < 1 or batch_size < 1:
        raise ValueError("records and batch size must be at least 1")
    rng = random.Random(seed)
    files: list[list[Line]] = []
    earlier: list[Line] = []
    for first in range(0, records, batch_size):
        count = min(batch_size, records - first)
        bad_count = min(count - 1, max(1, round(count * MALFORMED_SHARE)))
        bad = set(rng.sample(range(count), bad_count))
        lines = [
            Line(record_id(first + i), "malformed", malformed_text(first + i))
            if i in bad
            else Line(record_id(first + i), "valid", record_text(rng, first + i))
            for i in range(count)
        ]
        valid = [line for line in lines if line.kind == "valid"]
        extras = [
            Line(line.record_id, "repeat", line.text)
            for line in rng.sample(valid, min(len(valid), round(count * REPEAT_SHARE)))
        ]
        if earlier:
            resent = rng.sample(earlier, min(len(earlier), max(1, round(count * RESEND_SHARE))))
            extras += [Line(line.record_id, "resend", line.text) for line in resent]
        for extra in extras:
            lines.insert(rng.randrange(len(lines) + 1), extra)
        files.append(lines)
        earlier.extend(valid)
    return files


def file_name(index: int) -> str:
    """The landing name of input file `index`; its batch id is the same number."""
    return f"events-{index:06d}.json"


def append_ledger(path: Path, name: str, lines: Iterable[Line]) -> None:
    """Append a file's lines (id, kind, file) to the ledger and fsync it before the file lands."""
    with path.open("a", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows((line.record_id, line.kind, name) for line in lines)
        handle.flush()
        os.fsync(handle.fileno())


def read_ledger_file(path: Path) -> Ledger:
    """Read the generator's ledger back: which ids must land and which must be quarantined."""
    valid: set[str] = set()
    malformed: set[str] = set()
    files: set[str] = set()
    lines = 0
    with path.open(encoding="utf-8", newline="") as handle:
        for rid, kind, name in csv.reader(handle):
            lines += 1
            files.add(name)
            if kind == "valid":
                valid.add(rid)
            elif kind == "malformed":
                malformed.add(rid)
    return Ledger(frozenset(valid), frozenset(malformed), lines, len(files))


def compare(ledger: Ledger, target_ids: Sequence[str], quarantine_raw: Sequence[str]) -> Comparison:
    """Set the target's ids and the ids in the quarantine's raw text against the ledger."""
    quarantine_ids: list[str] = []
    unidentified = 0
    for raw in quarantine_raw:
        found = set(ID_PATTERN.findall(raw))
        if len(found) == 1:
            quarantine_ids.append(found.pop())
        else:
            unidentified += 1
    target = set(target_ids)
    quarantined = set(quarantine_ids)
    both = target & quarantined
    expected = ledger.valid | ledger.malformed
    return Comparison(
        records=len(expected),
        landed=len(target),
        quarantined=len(quarantined),
        duplicates=(len(target_ids) - len(target))
        + (len(quarantine_ids) - len(quarantined))
        + len(both),
        losses=len(expected - target - quarantined),
        misplaced=len(target - ledger.valid - both) + len(quarantined - ledger.malformed - both),
        unidentified=unidentified,
    )


def summary_line(figures: Figures) -> str:
    """The one line `make verify` prints: the figures, then `ok` or `FAILED`."""
    marker = "none" if figures.marker is None else str(figures.marker)
    return (
        f"verify: faults={figures.faults} point_faults={figures.point_faults} "
        f"random_kills={figures.random_kills} sigterms={figures.sigterms} "
        f"restarts={figures.restarts} records={figures.records} landed={figures.landed} "
        f"quarantined={figures.quarantined} duplicates={figures.duplicates} "
        f"losses={figures.losses} misplaced={figures.misplaced} "
        f"marker={marker}/{figures.last_batch} time={figures.seconds:.0f}s "
        + ("ok" if figures.ok else "FAILED")
    )
