"""The commit path's decisions, without Spark."""

from __future__ import annotations

import pytest

from ingest.decisions import (
    TimeWindow,
    backoff_seconds,
    commit_landed,
    decide_batch,
    dedup_condition,
    is_checkpoint_lost,
    is_content_conflict,
    merge_condition,
    should_retry,
    window_bounds,
)


@pytest.mark.parametrize(
    ("batch_id", "committed", "fail_on_rewind", "expected"),
    [
        (0, None, True, "commit"),
        (5, 4, True, "commit"),
        (9, 4, True, "commit"),
        (4, 4, True, "skip"),
        (4, 4, False, "skip"),
        (3, 4, False, "skip"),
        (3, 4, True, "rewound"),
        (0, 4, True, "rewound"),
    ],
)
def test_decide_batch(
    batch_id: int, committed: int | None, fail_on_rewind: bool, expected: str
) -> None:
    assert decide_batch(batch_id, committed, fail_on_rewind=fail_on_rewind) == expected


def test_checkpoint_lost_only_when_log_has_batches() -> None:
    assert is_checkpoint_lost(checkpoint_has_offsets=False, committed=3)
    assert not is_checkpoint_lost(checkpoint_has_offsets=True, committed=3)
    assert not is_checkpoint_lost(checkpoint_has_offsets=False, committed=None)
    assert not is_checkpoint_lost(checkpoint_has_offsets=False, committed=-1)


def test_content_conflict() -> None:
    assert is_content_conflict("a", "b")
    assert not is_content_conflict("a", "a")
    assert not is_content_conflict("a", None)
    assert not is_content_conflict("a", "")


def test_retry_policy() -> None:
    assert should_retry("transient", 1, 3)
    assert not should_retry("transient", 3, 3)
    assert not should_retry("terminal", 1, 3)
    assert backoff_seconds(1) == 0.2
    assert backoff_seconds(10) == 5.0


def test_commit_landed() -> None:
    assert commit_landed(5, 5)
    assert commit_landed(6, 5)
    assert not commit_landed(4, 5)
    assert not commit_landed(None, 0)


def test_merge_condition_pins_literal_batch_and_quotes_keys() -> None:
    assert merge_condition(("event_id", "day"), "app-1", 7) == (
        "`t`.`_lh_app_id` = 'app-1' AND `t`.`_lh_batch_id` = 7"
        " AND `t`.`event_id` <=> `s`.`event_id` AND `t`.`day` <=> `s`.`day`"
    )


def test_dedup_condition_per_scope() -> None:
    keys = ("event_id",)
    window = TimeWindow(
        "event_time", is_date=False, newest="2026-11-08 00:00:00.000000", seconds=604800
    )
    assert dedup_condition("batch", keys, "a", 1, window) == merge_condition(keys, "a", 1)
    assert dedup_condition("table", keys, "a", 1, None) == "`t`.`event_id` <=> `s`.`event_id`"
    assert dedup_condition("window", keys, "a", 1, window) == (
        "`t`.`event_time` >= TIMESTAMP '2026-11-08 00:00:00.000000' - INTERVAL 604800 SECONDS"
        " AND `t`.`event_time` <= TIMESTAMP '2026-11-08 00:00:00.000000'"
        " AND `t`.`event_id` <=> `s`.`event_id`"
    )
    assert dedup_condition("window", keys, "a", 1, None) == merge_condition(keys, "a", 1)


def test_date_windows_round_up_to_whole_days() -> None:
    window = TimeWindow("day", is_date=True, newest="2026-11-08", seconds=36 * 3600)
    assert window_bounds(window) == ("date_sub(DATE '2026-11-08', 2)", "DATE '2026-11-08'")
