"""Write sample click events into a landing directory, with the mess real landing zones have.

Files are dropped in a fixed order (their modification times are set explicitly) so the demo's
batches are the same on every run: two files per batch, the first file resent under a new name
in a later batch, duplicate rows inside files, and a few malformed lines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

KINDS = ("view", "click", "purchase")


def event(rng: random.Random, number: int, start: datetime) -> dict[str, object]:
    """One event with a stable id derived from its number."""
    return {
        "event_id": f"evt-{number:06d}",
        "user_id": f"user-{rng.randrange(50):03d}",
        "kind": rng.choice(KINDS),
        "amount": round(rng.uniform(1, 200), 2),
        "event_time": (start + timedelta(seconds=number)).isoformat(),
    }


def generate(landing: Path, files: int, per_file: int, seed: int) -> dict[str, int]:
    """Write the files and return the figures a reader can check the table against."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    if landing.exists():
        shutil.rmtree(landing)
    landing.mkdir(parents=True)
    drop_time = 1_700_000_000
    written: list[Path] = []
    unique_ids: set[str] = set()
    lines = 0
    for index in range(files):
        rows = [event(rng, index * per_file + i, start) for i in range(per_file)]
        rows += rows[: max(1, per_file // 10)]
        unique_ids.update(str(r["event_id"]) for r in rows)
        text = "\n".join(json.dumps(r) for r in rows)
        if index == files - 1:
            text += '\n{"event_id": "evt-broken", "amount": \n{"user_id": "user-000"}'
            lines += 2
        path = landing / f"events-{index:04d}.json"
        path.write_text(text + "\n", encoding="utf-8")
        written.append(path)
        lines += len(rows)
        if index == 2:
            resent = landing / "events-0000-resent.json"
            shutil.copyfile(landing / "events-0000.json", resent)
            written.append(resent)
            lines += per_file + max(1, per_file // 10)
    for offset, path in enumerate(written):
        os.utime(path, (drop_time + offset, drop_time + offset))
    return {"files": len(written), "lines": lines, "unique_events": len(unique_ids)}


def main() -> None:
    """Parse arguments, generate, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("landing", type=Path)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--per-file", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(generate(args.landing, args.files, args.per_file, args.seed)))


if __name__ == "__main__":
    main()
