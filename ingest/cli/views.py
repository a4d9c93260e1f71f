"""The table views of the commands whose rows are wider than a terminal: which columns first.

Each view is a pure choice from the rows: `history` shows the counts that mean something for
the table's kind (an insert table has no updates to count), and names an app id shown by every
row in its title rather than in a column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ingest.cli.output import View

_LEDGER_LABELS = MappingProxyType(
    {
        "app_id": "app",
        "batch_id": "batch",
        "rows_read": "read",
        "rows_inserted": "inserted",
        "rows_already_present": "present",
        "rows_updated": "updated",
        "rows_deleted": "deleted",
        "rows_ignored_older": "older",
        "rows_duplicate_in_batch": "dups",
        "rows_quarantined": "quarantined",
        "committed_at": "committed",
    }
)
_INSERT_COUNTS = ("rows_inserted", "rows_already_present")
_UPSERT_COUNTS = ("rows_inserted", "rows_updated", "rows_deleted", "rows_ignored_older")


def shared_value(rows: Sequence[Mapping[str, Any]], column: str) -> Any:
    """The value every row has in `column`, or None if they differ (or there are no rows)."""
    values = {row.get(column) for row in rows}
    return values.pop() if len(values) == 1 else None


def history_view(rows: Sequence[Mapping[str, Any]], upsert: bool) -> tuple[View, str | None]:
    """The columns `history` shows first, and the app id to name in the title instead of a
    column when every row has it."""
    app = shared_value(rows, "app_id")
    kinds = {row.get("kind") for row in rows}
    columns = (
        *(() if app is not None else ("app_id",)),
        "batch_id",
        *(("kind",) if kinds != {"batch"} else ()),
        "version",
        "rows_read",
        *(_UPSERT_COUNTS if upsert else _INSERT_COUNTS),
        "rows_duplicate_in_batch",
        "rows_quarantined",
        "committed_at",
        "source",
    )
    return View(columns, _LEDGER_LABELS), app
