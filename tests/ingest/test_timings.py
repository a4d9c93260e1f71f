"""Seconds per stage of a batch, measured and split without Spark."""

from __future__ import annotations

import pytest

from ingest.timings import Stopwatch, settled_timings


def test_a_stopwatch_adds_up_a_stage_entered_twice_and_one_that_raised() -> None:
    ticks = iter([0.0, 1.0, 5.0, 7.0, 10.0, 10.5])
    watch = Stopwatch(clock=lambda: next(ticks))
    with watch.stage("prepare"):
        pass
    with watch.stage("prepare"):
        pass
    with pytest.raises(ValueError, match="boom"), watch.stage("write"):
        raise ValueError("boom")
    assert watch.seconds == {"prepare": 3.0, "write": 0.5}


def test_settled_timings_split_the_settling_from_the_outcomes_append() -> None:
    timings = settled_timings({"write": 0.4}, 10.0, 11.0, 14.0, 2.0)
    assert timings == {
        "write": 0.4,
        "commit": 1.0,
        "audit_settle": 1.0,
        "outcomes_append": 2.0,
        "batch": 4.0,
    }
