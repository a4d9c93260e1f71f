"""Table views fit the terminal: whole headers, one line per row, the columns that matter."""

from __future__ import annotations

from typing import Any

from ingest.cli.output import OutputFormat, View, fit_columns, render
from ingest.cli.views import history_view


def ledger_row(app: str, batch: int, **counts: Any) -> dict[str, Any]:
    return {
        "app_id": app,
        "batch_id": batch,
        "version": batch + 1,
        "kind": "batch",
        "rows_read": 10,
        "rows_inserted": 10,
        "rows_already_present": 0,
        "rows_updated": 0,
        "rows_deleted": 0,
        "rows_ignored_older": 0,
        "rows_duplicate_in_batch": 0,
        "rows_quarantined": 0,
        "source": "json: " + ", ".join(f"part-{n:05}.json" for n in range(40)),
        "content_hash": "ab" * 32,
        "committed_at": "2026-11-27 16:40:05",
        **counts,
    }


def test_columns_keep_their_floors_then_widen_the_ones_needing_least() -> None:
    assert fit_columns(["a", "b"], [3, 4], 80) == ([3, 4], 0)
    widths, hidden = fit_columns(["name", "when", "x"], [60, 19, 1], 40)
    assert (widths, hidden) == ([16, 19, 1], 0)  # the timestamp whole, the long name cut
    assert fit_columns(["quarantined", "committed"], [11, 19], 20) == ([11], 1)


def test_a_table_view_fits_80_columns_with_whole_headers_and_one_line_per_row() -> None:
    rows = [ledger_row("orders-ingest-production-east", b) for b in range(3)]
    rows[1]["source"] = "line one\nline two"

    text = render(rows, OutputFormat.table, title="ledger of t")

    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) == 1 + 2 + 3 + 1  # title, header and rule, a line per row, caption
    assert lines[1].split()[:3] == ["app_id", "batch_id", "version"]
    assert lines[-1].strip().endswith("--wide or -f json shows them")


def test_wide_shows_every_column_by_name_and_every_value_whole() -> None:
    rows = [ledger_row("orders-ingest-production-east", 0)]
    view = View(("batch_id",), {"batch_id": "batch"})

    text = render(rows, OutputFormat.table, view=view, wide=True)

    assert text.splitlines()[0].split() == list(rows[0])
    assert rows[0]["source"] in text
    assert rows[0]["content_hash"] in text


def test_history_shows_the_counts_of_the_tables_kind_and_a_shared_app_in_the_title() -> None:
    rows = [ledger_row("app", 0), ledger_row("app", 1)]

    view, app = history_view(rows, upsert=False)
    assert app == "app"
    assert view.columns[:5] == (
        "batch_id",
        "version",
        "rows_read",
        "rows_inserted",
        "rows_already_present",
    )
    assert "rows_updated" not in view.columns

    upsert, _ = history_view([*rows, ledger_row("other", 0, kind="reset")], upsert=True)
    assert upsert.columns[:4] == ("app_id", "batch_id", "kind", "version")
    assert {"rows_updated", "rows_deleted", "rows_ignored_older"} <= set(upsert.columns)
    assert "rows_already_present" not in upsert.columns
    text = render(rows, OutputFormat.table, view=upsert)
    assert text.splitlines()[0].split()[:4] == ["app", "batch", "kind", "version"]
