"""The remote client's lease (`ingest.remote_lease`) and a checkpoint's run state; no Spark."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from ingest.checkpoint import LOCK_FILE, run_state
from ingest.remote_lease import (
    REMOTE_LEASE_SECONDS,
    RemoteLease,
    is_lease_lapsed,
    lease_conf,
    remote_lease_seconds,
)
from tables.errors import ConfigError


def test_a_lease_lapses_a_lease_after_its_renewal_or_when_the_clients_clock_runs_ahead() -> None:
    lease = RemoteLease("pid 7 on h", renewed_at=1000.0)

    assert not is_lease_lapsed(lease, 1000.0, 30)
    assert not is_lease_lapsed(lease, 1030.0, 30)
    assert is_lease_lapsed(lease, 1030.5, 30)
    assert not is_lease_lapsed(lease, 975.0, 30)  # a client clock a little ahead
    assert is_lease_lapsed(lease, 969.0, 30)  # a lease ahead: it would never lapse
    assert is_lease_lapsed(None, 1000.0, 30)


def test_a_lease_travels_as_a_setting_and_anything_else_reads_as_none() -> None:
    lease = RemoteLease("pid 7 on h", renewed_at=1000.25)

    assert RemoteLease.decode(lease.encode()) == lease
    for text in (None, "", "{", "[]", '{"owner": "x"}', '{"owner": "x", "renewed_at": "soon"}'):
        assert RemoteLease.decode(text) is None, text
    assert lease_conf("app_1") == "spark.lakehouse.remote.lease.app_1"


def test_the_lease_length_is_a_number_of_seconds_of_at_least_three() -> None:
    assert remote_lease_seconds(None) == remote_lease_seconds(" ") == REMOTE_LEASE_SECONDS
    assert remote_lease_seconds("4.5") == 4.5
    for bad in ("2", "soon", "-1"):
        with pytest.raises(ConfigError, match="LAKEHOUSE_REMOTE_LEASE_SECONDS must be"):
            remote_lease_seconds(bad)


def test_a_checkpoint_is_running_while_its_lock_is_held_and_names_its_last_holder(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "cp"
    assert run_state(str(checkpoint)).describe() == "stopped"
    checkpoint.mkdir()
    holder = "pid 42 on host, through Spark Connect session s-1"
    (checkpoint / LOCK_FILE).write_text(holder + "\n")
    with open(checkpoint / LOCK_FILE) as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        assert run_state(str(checkpoint)).describe() == f"running: {holder}"
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    assert run_state(str(checkpoint)).describe() == f"stopped (last run: {holder})"
    assert run_state("s3a://bucket/cp").describe() == (
        "not shown (a checkpoint on s3a has no lock to try)"
    )
