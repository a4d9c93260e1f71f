"""The commit path's decisions, without Spark."""

from __future__ import annotations

import pytest

from ingest.decisions import (
    ONE_TASK_BYTES,
    TimeWindow,
    backoff_seconds,
    commit_landed,
    decide_batch,
    dedup_condition,
    dedup_scope,
    is_audit_final,
    is_checkpoint_lost,
    is_content_conflict,
    is_one_task_batch,
    is_same_fingerprint,
    lost_checkpoint_fixes,
    merge_condition,
    should_append,
    should_retry,
    window_bounds,
)
from ingest.outcomes import unrecorded_batches


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


@pytest.mark.parametrize(
    ("scope", "batch_id", "high_water", "expected"),
    [
        ("batch", 0, None, True),
        ("batch", 5, 4, True),
        ("batch", 4, 4, False),
        ("batch", 3, 9, False),
        ("table", 5, None, False),
        ("window", 5, None, False),
    ],
)
def test_a_blind_append_only_where_the_merge_can_match_nothing(
    scope: str, batch_id: int, high_water: int | None, expected: bool
) -> None:
    assert should_append(scope, batch_id, high_water) is expected  # type: ignore[arg-type]


def test_an_audit_is_final_only_right_after_the_version_it_read() -> None:
    assert is_audit_final(4, 5)
    assert not is_audit_final(4, 6)
    assert not is_audit_final(None, 5)
    assert not is_audit_final(4, None)


def test_a_fingerprint_settles_a_skip_only_when_both_sides_carry_the_same_one() -> None:
    assert is_same_fingerprint({"fingerprint": "ab"}, {"fingerprint": "ab", "files": []})
    assert not is_same_fingerprint({"fingerprint": "ab"}, {"fingerprint": "cd"})
    assert not is_same_fingerprint({"fingerprint": ""}, {"fingerprint": ""})
    assert not is_same_fingerprint({}, {})
    assert not is_same_fingerprint(None, {"fingerprint": "ab"})


def test_the_dedup_scope_is_the_target_side_of_the_condition() -> None:
    window = TimeWindow("event_time", is_date=False, newest="2026-11-08 00:00:00", seconds=60)
    assert dedup_scope("batch", "a", 1, None) == (
        "`t`.`_lh_app_id` = 'a' AND `t`.`_lh_batch_id` = 1"
    )
    assert dedup_scope("table", "a", 1, None) is None
    assert dedup_scope("window", "a", 1, None) == dedup_scope("batch", "a", 1, None)
    assert dedup_scope("window", "a", 1, window) == (
        "`t`.`event_time` >= TIMESTAMP '2026-11-08 00:00:00' - INTERVAL 60 SECONDS AND "
        "`t`.`event_time` <= TIMESTAMP '2026-11-08 00:00:00'"
    )


def test_the_batches_whose_outcomes_are_not_kept_lie_between_the_two_markers() -> None:
    assert unrecorded_batches(None, 2) == [0, 1, 2]
    assert unrecorded_batches(1, 3) == [2, 3]
    assert unrecorded_batches(3, 3) == []
    assert unrecorded_batches(None, None) == []
    assert unrecorded_batches(None, -1) == []


def test_a_lost_kafka_checkpoint_names_resume_from_log_first_and_a_file_one_does_not() -> None:
    assert lost_checkpoint_fixes("clicks", "kafka") == (
        "run `lakehouse ingest clicks --resume-from-log` to start a new checkpoint after the "
        "offsets the ledger records, restore the checkpoint, or run under a new app id"
    )
    assert lost_checkpoint_fixes("landing", "files") == (
        "restore the checkpoint, or run under a new app id"
    )


@pytest.mark.parametrize(
    ("estimated", "expected"),
    [
        (None, False),  # over Spark Connect: not estimated
        (0, True),
        (ONE_TASK_BYTES - 1, True),
        (ONE_TASK_BYTES, False),
        (2**63 - 1, False),  # Spark's default for a source that cannot tell (Kafka)
    ],
)
def test_is_one_task_batch(estimated: int | None, expected: bool) -> None:
    assert is_one_task_batch(estimated) is expected
