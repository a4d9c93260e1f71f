"""Fault points at named places of the commit path, for crash and recovery tests.

Switched on only by the LAKEHOUSE_FAULT environment variable, so a normal run pays one dict lookup
per point. The value is a comma-separated list of `point:action[@batch][%percent]`, e.g.
`after_commit:exit@2` (exit the process right after batch 2's Delta commit) or
`after_commit:raise%10` (raise on about 10% of batches).

Actions: `raise` an InjectedFaultError (a transient error), `exit` the process at once with
status 137 without running cleanup, or `kill` it with SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass
from typing import Literal, get_args

from tables.errors import ConfigError, InjectedFaultError

FaultPoint = Literal[
    "before_write",
    "after_commit",
    "before_audit",
    "mid_quarantine",
]
FaultAction = Literal["raise", "exit", "kill"]
ENV_VAR = "LAKEHOUSE_FAULT"


@dataclass(frozen=True)
class FaultRule:
    """One armed fault: where, what, and optionally on which batch or how often."""

    point: FaultPoint
    action: FaultAction
    batch_id: int | None = None
    percent: float | None = None

    def matches(self, point: str, batch_id: int, roll: float) -> bool:
        """Return True if this rule fires at `point` for `batch_id` given a roll in [0, 100)."""
        if point != self.point:
            return False
        if self.batch_id is not None and batch_id != self.batch_id:
            return False
        return self.percent is None or roll < self.percent


def parse_rules(text: str) -> tuple[FaultRule, ...]:
    """Parse the LAKEHOUSE_FAULT syntax; raise ConfigError on anything unknown."""
    rules = []
    for raw in filter(None, (part.strip() for part in text.split(","))):
        spec, _, percent = raw.partition("%")
        spec, _, batch = spec.partition("@")
        point, _, action = spec.partition(":")
        if point not in get_args(FaultPoint) or action not in get_args(FaultAction):
            raise ConfigError(
                f"invalid {ENV_VAR} rule {raw!r}: expected point:action with point in "
                f"{get_args(FaultPoint)} and action in {get_args(FaultAction)}"
            )
        try:
            rules.append(
                FaultRule(
                    point=point,  # type: ignore[arg-type]
                    action=action,  # type: ignore[arg-type]
                    batch_id=int(batch) if batch else None,
                    percent=float(percent) if percent else None,
                )
            )
        except ValueError as exc:
            raise ConfigError(f"invalid {ENV_VAR} rule {raw!r}: {exc}") from exc
    return tuple(rules)


def fault_point(point: FaultPoint, batch_id: int) -> None:
    """Fire any fault armed for `point` and `batch_id`; a no-op unless LAKEHOUSE_FAULT is set."""
    text = os.environ.get(ENV_VAR)
    if not text:
        return
    roll = random.uniform(0, 100)
    for rule in parse_rules(text):
        if rule.matches(point, batch_id, roll):
            _fire(rule, batch_id)


def _fire(rule: FaultRule, batch_id: int) -> None:
    if rule.action == "raise":
        raise InjectedFaultError(f"fault injected at {rule.point} for batch {batch_id}")
    if rule.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)
