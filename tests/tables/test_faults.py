from __future__ import annotations

import time
from pathlib import Path
from typing import get_args

import pytest

from tables import faults
from tables.errors import ConfigError, InjectedFaultError
from tables.faults import (
    AdminFaultPoint,
    FaultPoint,
    FaultRule,
    fault_during_write,
    fault_point,
    parse_rules,
)


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


@pytest.mark.parametrize("point", [*get_args(FaultPoint), *get_args(AdminFaultPoint)])
def test_fault_point_is_off_without_env(
    point: FaultPoint | AdminFaultPoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same point and batch that an armed rule catches are left alone once it is unset."""
    monkeypatch.setenv("LAKEHOUSE_FAULT", f"{point}:exit")
    assert faults.armed_rule(point, 1) is not None
    monkeypatch.delenv("LAKEHOUSE_FAULT")
    assert faults.armed_rule(point, 1) is None
    fault_point(point, 1)


def test_fault_point_raises_when_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_FAULT", "after_commit:raise@1")
    fault_point("after_commit", 0)
    with pytest.raises(InjectedFaultError):
        fault_point("after_commit", 1)


@pytest.mark.parametrize("point", ["before_commit", "mid_quarantine"])
def test_watched_points_take_only_process_actions(point: str) -> None:
    with pytest.raises(ConfigError, match="watching thread"):
        parse_rules(f"{point}:raise")
    assert parse_rules(f"{point}:stall@3") == (FaultRule(point, "stall", batch_id=3),)  # type: ignore[arg-type]


def test_seeded_rolls_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_FAULT", "after_commit:raise%30")

    def fired(seed: str) -> list[int]:
        monkeypatch.setenv("LAKEHOUSE_FAULT_SEED", seed)
        faults._rolls.clear()
        hits = []
        for batch in range(40):
            try:
                fault_point("after_commit", batch)
            except InjectedFaultError:
                hits.append(batch)
        return hits

    assert fired("1") == fired("1")
    assert 0 < len(fired("1")) < 40
    assert fired("1") != fired("2")


def test_a_watched_point_fires_once_a_data_file_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired: list[tuple[str, int]] = []
    monkeypatch.setattr(faults, "fire", lambda rule, batch: fired.append((rule.point, batch)))
    monkeypatch.setenv("LAKEHOUSE_FAULT", "before_commit:kill@2")
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "old.parquet").write_bytes(b"")

    with fault_during_write("before_commit", 2, lambda: f"file:{tmp_path}"):
        (tmp_path / "_delta_log" / "x.parquet").write_bytes(b"")  # log files do not count
        time.sleep(0.1)
    assert fired == []
    with fault_during_write("before_commit", 1, lambda: str(tmp_path)):
        (tmp_path / "part-1.parquet").write_bytes(b"")
        time.sleep(0.1)
    assert fired == []  # armed for batch 2 only
    with fault_during_write("before_commit", 2, lambda: str(tmp_path)):
        (tmp_path / "p=1").mkdir()
        (tmp_path / "p=1" / "part-2.parquet").write_bytes(b"")
        time.sleep(0.2)
    assert fired == [("before_commit", 2)]
