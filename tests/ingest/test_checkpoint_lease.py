"""The decisions of a checkpoint's lease on S3, without S3: what it holds, when it is stale.

The lease itself, taken and refused by real runs on a local S3-API server, is in
tests/ingest/test_object_store_runs.py.
"""

from __future__ import annotations

import pytest

from ingest.checkpoint_lease import LEASE_SECONDS, Lease, decode_lease, is_expired, lease_seconds
from tables.errors import ConfigError


def test_a_lease_reads_back_as_written_and_anything_else_is_no_lease() -> None:
    lease = Lease("owner", "host-a", 42, 1_800_000_000.5)

    assert decode_lease(lease.encode()) == lease
    assert decode_lease(b"not json") is None
    assert decode_lease(b'{"owner": "x"}') is None
    assert "pid 42 on host-a" in lease.describe()


def test_a_lease_holds_until_its_time_unless_its_holder_on_this_host_is_gone() -> None:
    lease = Lease("owner", "host-a", 42, 1000.0)

    def alive(pid: int) -> bool:
        return pid == 42

    assert not is_expired(lease, 999.0, "host-a", alive)
    assert is_expired(lease, 1000.0, "host-a", alive)
    assert is_expired(lease, 999.0, "host-a", lambda pid: False)  # killed here: stale at once
    assert not is_expired(lease, 999.0, "host-b", lambda pid: False)  # another host's: wait
    assert is_expired(None, 0.0, "host-a", alive)


def test_the_lease_length_is_the_default_or_a_stated_number_of_seconds() -> None:
    assert lease_seconds(None) == LEASE_SECONDS
    assert lease_seconds(" ") == LEASE_SECONDS
    assert lease_seconds("600") == 600.0
    for wrong in ("2", "-5", "soon"):
        with pytest.raises(ConfigError, match="LAKEHOUSE_CHECKPOINT_LEASE_SECONDS"):
            lease_seconds(wrong)
