"""What a running process holds, read from /proc and `jcmd`: the soak's samplers.

Every read tolerates a process that ends while it is read (a listing of /proc is a snapshot).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path
from typing import NamedTuple


def status_field(pid: int, name: str) -> int:
    """A number from /proc/PID/status (kB for memory)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    # A process can end between the listing and the read (ESRCH, ENOENT): it is skipped.
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def driver_jvm(pid: int) -> int:
    """The driver JVM the ingest process started."""
    for child in descendants(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                if b"java" in cmdline.read().split(b"\0")[0]:
                    return child
        except OSError:
            continue  # it ended since the listing
    raise RuntimeError("the ingest process has no driver JVM")


class LiveHeap(NamedTuple):
    """What a JVM keeps after a full GC, from its class histogram."""

    mib: float
    largest: dict[str, float]
    """The 15 largest classes, MiB each."""
    generated_classes: int
    """Classes Spark compiled that are still held (one `GeneratedClass` object each: the
    compiled-code cache's entries and what running plans hold)."""


#: The class every class Spark compiles at run time extends (janino's output).
GENERATED_CLASS = "org.apache.spark.sql.catalyst.expressions.GeneratedClass"


def live_heap(jvm: int) -> LiveHeap:
    """The JVM's live heap: the class histogram taken after a full GC (`jcmd GC.class_histogram`).

    Each compiled class is loaded by a class loader of its own, so the histogram has a row per
    compiled class still held, all named `GENERATED_CLASS`: their count is the cache's size.
    """
    histogram = subprocess.run(
        ["jcmd", str(jvm), "GC.class_histogram"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    total = re.search(r"^Total\s+\d+\s+(\d+)", histogram, re.MULTILINE)
    rows = re.findall(r"^\s*\d+:\s+\d+\s+(\d+)\s+(\S+)", histogram, re.MULTILINE)
    largest = {name: round(int(size) / 2**20, 2) for size, name in rows[:15]}
    generated = sum(1 for _, name in rows if name == GENERATED_CLASS)
    return LiveHeap(int(total.group(1)) / 2**20 if total else float("nan"), largest, generated)


def thread_names(pid: int) -> dict[str, int]:
    """The process's threads by name, digits folded (`pool-12-thread-3` -> `pool-#-thread-#`)."""
    names: dict[str, int] = {}
    for comm in Path(f"/proc/{pid}/task").glob("*/comm"):
        try:
            name = re.sub(r"\d+", "#", comm.read_text().strip())
        except OSError:
            continue
        names[name] = names.get(name, 0) + 1
    return dict(sorted(names.items(), key=lambda item: -item[1]))


def tree_size(path: Path) -> int:
    """Bytes of the files under `path`; a file renamed or removed while it is walked (Spark's
    checkpoint writes a temporary file and renames it) counts as absent."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(folder, name)).st_size
    return total
