from __future__ import annotations

import pytest

from tables.errors import ConfigError, InjectedFaultError
from tables.faults import FaultRule, fault_point, parse_rules


def test_parse_rules_with_batch_and_percent() -> None:
    assert parse_rules("after_commit:exit@2, before_write:raise%10") == (
        FaultRule("after_commit", "exit", batch_id=2),
        FaultRule("before_write", "raise", percent=10.0),
    )


@pytest.mark.parametrize("text", ["nowhere:raise", "after_commit:explode", "after_commit:raise@x"])
def test_parse_rules_rejects_unknown(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_rules(text)


def test_rule_matching() -> None:
    rule = FaultRule("after_commit", "raise", batch_id=3, percent=50)
    assert rule.matches("after_commit", 3, roll=10)
    assert not rule.matches("after_commit", 3, roll=60)
    assert not rule.matches("after_commit", 4, roll=10)
    assert not rule.matches("before_write", 3, roll=10)


def test_fault_point_is_off_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKEHOUSE_FAULT", raising=False)
    fault_point("after_commit", 1)


def test_fault_point_raises_when_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_FAULT", "after_commit:raise@1")
    fault_point("after_commit", 0)
    with pytest.raises(InjectedFaultError):
        fault_point("after_commit", 1)
