"""A run's report stays the same size however long the run: totals, and its newest results."""

from __future__ import annotations

import pytest

from ingest.commit.batch_result import BatchResult
from ingest.maintenance import MaintenanceRun
from ingest.run_report import KEPT, RunReport, kept_newest
from quality.check_results import CheckResult


def _result(batch_id: int, table: str = "events", **rows: int) -> BatchResult:
    status = "empty" if batch_id % 7 == 0 else "committed"
    return BatchResult(table, "app", batch_id, status, **rows)  # type: ignore[arg-type]


def _audit(batch_id: int, failed: bool) -> CheckResult:
    return CheckResult(
        "events",
        "duplicate_keys",
        "failed" if failed else "passed",
        checked_keys=10,
        failing_keys=1 if failed else 0,
        sample_keys=("e1",) if failed else (),
        batch_id=batch_id,
    )


def test_kept_newest_drops_the_oldest() -> None:
    items: list[int] = []

    for n in range(10):
        kept_newest(items, n, kept=3)

    assert items == [7, 8, 9]


def test_a_long_run_keeps_its_totals_and_only_its_newest_results() -> None:
    report = RunReport("p", "app", "events")
    batches = 3 * KEPT + 5

    for batch_id in range(batches):
        report.add_result(_result(batch_id, rows_inserted=2, rows_quarantined=batch_id % 2))
        report.add_audit(_audit(batch_id, failed=batch_id % 10 == 0))
        report.add_upkeep(MaintenanceRun("events", batch_id, "optimize", "0 files"))

    empty = len([b for b in range(batches) if b % 7 == 0])
    assert report.batches == batches
    assert (report.count("committed"), report.count("empty")) == (batches - empty, empty)
    assert report.rows_inserted == 2 * batches
    assert report.rows_quarantined == batches // 2
    assert report.total("updated") == 0
    assert not report.is_upsert
    assert report.last_batch_id == batches - 1
    assert report.audits_failed == len(range(0, batches, 10))
    assert [r.batch_id for r in report.results] == list(range(batches - KEPT, batches))
    assert len(report.audits) == len(report.maintenance) == KEPT
    assert len(report.failed_audits) == report.audits_failed  # fewer than KEPT: all kept
    assert report.failed_audits[-1].batch_id == 3 * KEPT


def test_a_routed_run_totals_each_table() -> None:
    report = RunReport("p", "app", "orders")

    for batch_id in range(1, 4):
        report.add_result(_result(batch_id, "orders", rows_inserted=3))
        report.add_result(_result(batch_id, "refunds", rows_inserted=1, rows_quarantined=1))

    assert list(report.tables) == ["orders", "refunds"]
    assert report.tables["orders"].batches == 3
    assert report.tables["refunds"].rows["quarantined"] == 3
    assert report.rows_inserted == 12  # over every target, as before


def test_an_unknown_fate_is_refused() -> None:
    with pytest.raises(ValueError, match="fate must be one of inserted"):
        RunReport("p", "app", "events").total("copied")
