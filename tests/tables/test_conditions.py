"""Spark failures are told apart by their error condition, never by their message text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from tables.engine.jvm.conditions import error_condition, has_condition

ROOT = Path(__file__).resolve().parents[2]
#: `"SOME_CONDITION" in str(exc)` and its negation: a condition matched on the message.
TEXT_MATCH = re.compile(r"""["'][A-Z][A-Z0-9_.]{5,}["']\s+(?:not\s+)?in\s+str\(""")


def test_a_missing_path_has_its_condition_also_through_a_wrapping_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    with pytest.raises(AnalysisException, match=r"absent\.json") as caught:
        spark.read.json(str(tmp_path / "absent.json"))
    assert error_condition(caught.value) == "PATH_NOT_FOUND"

    outer = RuntimeError("listing failed")
    outer.__cause__ = caught.value
    assert has_condition(outer, "DELTA_MISSING_DELTA_TABLE", "PATH_NOT_FOUND")
    assert not has_condition(outer, "PATH")  # whole names only, not prefixes of one


def test_a_delta_error_has_its_condition_and_an_ordinary_error_none(
    spark: SparkSession, tmp_path: Path
) -> None:
    with pytest.raises(AnalysisException, match="not a Delta table") as caught:
        spark.sql(f"DESCRIBE DETAIL delta.`{tmp_path}`").collect()
    assert has_condition(caught.value, "DELTA_MISSING_DELTA_TABLE")
    assert error_condition(ValueError("PATH_NOT_FOUND")) is None


class _SubConditionedError(Exception):
    def getCondition(self) -> str:  # noqa: N802 (PySpark's name)
        return "DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT"


def test_a_sub_condition_counts_as_its_condition() -> None:
    assert has_condition(_SubConditionedError(), "DELTA_CONCURRENT_APPEND")
    assert not has_condition(_SubConditionedError(), "DELTA_CONCURRENT")


def test_no_package_matches_a_condition_in_an_errors_text() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("tables", "quality", "ingest")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if TEXT_MATCH.search(line)
    ]
    assert found == []
