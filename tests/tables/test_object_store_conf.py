"""The Spark settings a table on object storage brings to its session (no server needed)."""

from __future__ import annotations

from tables.engine.object_store import (
    FAST_LIST_CONF,
    LOG_STORE_CLASS,
    LOG_STORE_CONF,
    StorageSpec,
)


def test_both_log_stores_list_the_log_from_a_start_key_and_carry_no_credential() -> None:
    for kind in ("conditional", "dynamodb"):
        conf = StorageSpec(endpoint="http://127.0.0.1:9000", log_store=kind).session_conf()

        assert conf[FAST_LIST_CONF] == "true"
        assert not any("secret" in key.lower() or "access.key" in key for key in conf)
    conditional = StorageSpec().session_conf()
    assert conditional[LOG_STORE_CONF] == LOG_STORE_CLASS
    assert LOG_STORE_CONF not in StorageSpec(log_store="dynamodb").session_conf()
