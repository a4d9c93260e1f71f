from __future__ import annotations

from datetime import datetime

from tables.log import CommitMetadata, describe_source, ledger_entry_from_history

META = CommitMetadata(
    app_id="app",
    batch_id=4,
    source={"kind": "files", "format": "json", "files": ["/l/a.json", "/l/b.json"]},
    rows_read=10,
    rows_quarantined=1,
    content_hash="abc",
    commit_token="tok",
)


def test_commit_metadata_round_trips() -> None:
    assert CommitMetadata.from_json(META.to_json()) == META


def test_foreign_user_metadata_is_ignored() -> None:
    assert CommitMetadata.from_json(None) is None
    assert CommitMetadata.from_json("hand-written note") is None
    assert CommitMetadata.from_json('{"app_id": "x"}') is None


def test_ledger_entry_derives_counts_from_merge_metrics() -> None:
    row = {
        "version": 7,
        "timestamp": datetime(2026, 1, 1),
        "operation": "MERGE",
        "userMetadata": META.to_json(),
        "operationMetrics": {"numSourceRows": "8", "numTargetRowsInserted": "5"},
    }
    entry = ledger_entry_from_history(row)
    assert entry is not None
    assert (entry.rows_inserted, entry.rows_already_present, entry.rows_duplicate_in_batch) == (
        5,
        3,
        1,
    )
    assert entry.as_row()["source"] == "json: a.json, b.json"


def test_describe_source_truncates_long_file_lists() -> None:
    files = [f"/l/{i}.json" for i in range(5)]
    assert describe_source({"format": "json", "files": files}).endswith("(+2 more)")
