"""The JVM boundary holds: PySpark's private attributes are read in one module only.

Every other module goes through public Spark and Delta APIs so that it also runs over Spark
Connect, or through `tables.engine.jvm`, which refuses over Connect with one line.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tables", "quality", "ingest")
PRIVATE = re.compile(r"\._(jvm|jsparkSession|jsc|jdf|jconf|jsqlContext|jreader|jwrite|gateway)\b")
BOUNDARY = Path("tables/engine/jvm/__init__.py")


def private_uses() -> dict[Path, list[int]]:
    """Each package file that reads a private PySpark attribute, with its line numbers."""
    found: dict[Path, list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            hits = [n for n, line in enumerate(lines, 1) if PRIVATE.search(line)]
            if hits:
                found[path.relative_to(ROOT)] = hits
    return found


def test_private_pyspark_attributes_appear_only_in_the_boundary_module() -> None:
    uses = private_uses()

    assert set(uses) == {BOUNDARY}, f"private PySpark attributes outside {BOUNDARY}: {uses}"


def test_quality_and_ingest_reach_the_jvm_only_through_tables_jvm_or_public_apis() -> None:
    py4j = re.compile(r"^\s*(from|import) py4j\b", re.MULTILINE)
    offenders = [
        path.relative_to(ROOT)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if py4j.search(path.read_text(encoding="utf-8"))
        and not path.relative_to(ROOT).as_posix().startswith("tables/engine/jvm/")
    ]

    assert offenders == []
