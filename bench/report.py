"""The bench's report: ratios with their targets, printed as a table and written as JSON.

`bench/results/latest.json` holds `{"ratios": [{"name", "value", "target", "met"}, ...], ...}`
under the names the targets are tracked by; `bench-<UTC time>.json` keeps each run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


@dataclass(frozen=True)
class Spread:
    """How many rounds each side's median is of, and each side's fastest and slowest round."""

    rounds: int
    numerator: tuple[float, float]
    denominator: tuple[float, float]


@dataclass
class Ratio:
    """One measured ratio and its target (None: context only, no target)."""

    name: str
    value: float
    target: str | None
    met: bool | None
    numerator_s: float
    denominator_s: float
    spread: Spread | None = None


@dataclass
class Stopwatch:
    """Wall time per stage of the run: what a default run's length is spent on."""

    laps: dict[str, float] = field(default_factory=dict)
    mark: float = field(default_factory=time.perf_counter)

    def lap(self, stage: str) -> None:
        """Record and print the time since the previous lap as `stage`."""
        now = time.perf_counter()
        self.laps[stage] = round(now - self.mark, 1)
        self.mark = now
        console.print(f"  [dim]{stage}: {self.laps[stage]:.0f} s[/]")


def is_met(value: float, target: str) -> bool:
    """True if `value` meets a target written as `<= x` or `>= x`."""
    bound = float(target.split()[1])
    return value <= bound if target.startswith("<=") else value >= bound


@dataclass
class Report:
    """The ratios and context figures of one run, in the order they were measured."""

    ratios: list[Ratio] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)

    def ratio(
        self,
        name: str,
        num: float | list[float],
        den: float | list[float],
        target: str | None = None,
    ) -> None:
        """Record `num / den` under `name`, judged against `target` (`<= x`, `>= x`) if given.

        A side given as its rounds' times is taken as their median, and the spread is kept.
        """
        spread = None
        if isinstance(num, list) and isinstance(den, list):
            spread = Spread(min(len(num), len(den)), (min(num), max(num)), (min(den), max(den)))
        num = statistics.median(num) if isinstance(num, list) else num
        den = statistics.median(den) if isinstance(den, list) else den
        value = num / den
        met = is_met(value, target) if target else None
        self.ratios.append(Ratio(name, value, target, met, num, den, spread))
        shown = f"  {name}: {value:.3f} ({num:.3f}s / {den:.3f}s)"
        if spread is not None:
            (low, high), (d_low, d_high) = spread.numerator, spread.denominator
            shown += f", rounds {low:.3f}-{high:.3f} / {d_low:.3f}-{d_high:.3f}"
        console.print(shown)

    def note(self, name: str, value: Any) -> None:
        """Record a context figure (a time, a count) that has no target."""
        self.context[name] = value
        console.print(f"  {name}: {value}")


def machine(master: str) -> dict[str, object]:
    """Cores, memory, load and versions of this run."""
    import pyspark

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory, 1),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "delta_spark": package_version("delta-spark"),
        "spark_master": master,
    }


def show(report: Report, master: str, sizes: dict[str, str], watch: Stopwatch) -> None:
    """Print the ratios as a table, with the context, the machine and where the time went."""
    table = Table(title="lakehouse-ingest benchmark (ratios measured side by side in one run)")
    for column in ("ratio", "measured", "target", ""):
        table.add_column(column)
    for r in report.ratios:
        verdict = "context" if r.met is None else "met" if r.met else "[red]MISSED[/]"
        table.add_row(r.name, f"{r.value:.3f}", r.target or "", verdict)
    console.print(table)
    for name, value in report.context.items():
        console.print(f"{name}: {value}")
    console.print(f"machine: {machine(master)}; sizes: {sizes}")
    total = sum(watch.laps.values())
    stages = ", ".join(f"{stage} {seconds:.0f} s" for stage, seconds in watch.laps.items())
    console.print(f"run: {total / 60:.1f} min ({stages})")


def save(
    report: Report, master: str, sizes: dict[str, str], watch: Stopwatch, out: Path, label: str
) -> Path:
    """Write the run as `latest.json` and `bench-<UTC time>.json` under `out`; the latter's path.

    `label` says under what conditions the figures were taken (a quiet machine, or not).
    """
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "label": label,
        "ratios": [
            {"name": r.name, "value": r.value, "target": r.target, "met": r.met}
            for r in report.ratios
        ],
        "figures": [asdict(r) for r in report.ratios],
        "context": report.context,
        "machine": machine(master),
        "sizes": sizes,
        "stage_seconds": watch.laps,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(payload, indent=2)
    (out / "latest.json").write_text(text)
    path = out / f"bench-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(text)
    console.print(f"raw figures: {path} (and {out / 'latest.json'})")
    return path
