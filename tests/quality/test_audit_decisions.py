"""The audit policy's two decisions, without Spark: hold the table (`fail`), or repair (`repair`).

A finding holds the table only under `fail` and repairs it only under `repair`; a passed check,
a repaired one, and the `warn` policy do neither.
"""

from __future__ import annotations

import pytest

from quality.audit import should_hold, should_repair
from quality.check_results import CheckResult, CheckStatus, should_flush


def finding(status: CheckStatus, action: str | None) -> CheckResult:
    """A duplicate-key check of batch 3 under `action`, with `status`."""
    failing = 0 if status == "passed" else 2
    return CheckResult(
        table="events",
        check="duplicate_keys",
        status=status,
        checked_keys=10,
        failing_keys=failing,
        sample_keys=("e1", "e2")[:failing],
        app_id="app",
        batch_id=3,
        version=4,
        action=action,
    )


@pytest.mark.parametrize(
    ("status", "action", "hold", "repair"),
    [
        ("failed", "fail", True, False),
        ("failed", "repair", False, True),
        ("failed", "warn", False, False),
        ("failed", None, False, False),
        ("passed", "fail", False, False),
        ("passed", "repair", False, False),
        ("repaired", "repair", False, False),
    ],
)
def test_the_policy_decides_hold_and_repair(
    status: CheckStatus, action: str | None, hold: bool, repair: bool
) -> None:
    result = finding(status, action)

    assert should_hold(result) is hold
    assert should_repair(result) is repair


def test_outcomes_are_appended_on_a_failure_a_count_or_an_age() -> None:
    assert should_flush(1, 0.0, failed=True, every=20, seconds=60)
    assert should_flush(20, 0.0, failed=False, every=20, seconds=60)
    assert should_flush(3, 61.0, failed=False, every=20, seconds=60)
    assert not should_flush(3, 5.0, failed=False, every=20, seconds=60)
    assert not should_flush(0, 99.0, failed=True, every=20, seconds=60)
