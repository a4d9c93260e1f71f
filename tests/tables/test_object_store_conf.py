"""The Spark settings of a session's log stores: S3's and the local disk's (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.engine.connectors import CACHE_ENV
from tables.engine.object_store import (
    FAST_LIST_CONF,
    LOCAL_LOG_STORE_CONF,
    LOG_STORE_CLASS,
    LOG_STORE_CONF,
    StorageSpec,
    local_log_store,
)


def test_both_log_stores_list_the_log_from_a_start_key_and_carry_no_credential() -> None:
    for kind in ("conditional", "dynamodb"):
        conf = StorageSpec(endpoint="http://127.0.0.1:9000", log_store=kind).session_conf()

        assert conf[FAST_LIST_CONF] == "true"
        assert not any("secret" in key.lower() or "access.key" in key for key in conf)
    conditional = StorageSpec().session_conf()
    assert conditional[LOG_STORE_CONF] == LOG_STORE_CLASS
    assert LOG_STORE_CONF not in StorageSpec(log_store="dynamodb").session_conf()


def test_a_machine_without_delta_storage_at_hand_keeps_deltas_own_local_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Maven fetch for a plain local session: without a Delta storage JAR fetched or resolved
    before (an empty JAR cache), the session keeps Delta's store and adds no JAR."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))

    assert local_log_store() == ([], {})
    assert not any(tmp_path.iterdir())  # nothing fetched, nothing compiled


def test_the_listing_store_is_compiled_against_the_storage_jar_at_hand() -> None:
    jars, conf = local_log_store()  # `make setup` fetched and resolved Delta's JARs

    assert LOCAL_LOG_STORE_CONF in conf
    assert any("delta-storage-" in jar.name for jar in jars)
    assert all(jar.is_file() for jar in jars)
