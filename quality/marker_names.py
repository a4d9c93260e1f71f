"""The three Delta txn markers one batch of an app sets, named in one place.

A batch commits into three tables, each write idempotent through its own SetTransaction marker
(txnAppId -> last batch id), so a re-run batch skips what already landed:
- the target table's MERGE, under the app id;
- the quarantine append of its rejected rows, under the app id, in `<table>_quarantine`;
- the record of its audit and expectation outcomes, under `audit.<table>.<app id>`, in
  `lakehouse_quality`.
Whoever writes or moves a marker takes its (table, txnAppId) from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from quality.check_results import quality_table_name
from tables.spec import quarantine_table_name

MarkerRole = Literal["target", "quarantine", "audit"]


@dataclass(frozen=True)
class Marker:
    """One txn marker: the table it lives in and its txnAppId."""

    table: str
    txn_app_id: str
    role: MarkerRole


def audit_txn_app_id(table: str, app_id: str) -> str:
    """The txnAppId under which an app's audit outcomes for `table` are recorded."""
    return f"audit.{table}.{app_id}"


def batch_markers(table: str, app_id: str) -> tuple[Marker, Marker, Marker]:
    """The target, quarantine and audit markers a batch of `app_id` into `table` sets."""
    return (
        Marker(table, app_id, "target"),
        Marker(quarantine_table_name(table), app_id, "quarantine"),
        Marker(quality_table_name(table), audit_txn_app_id(table, app_id), "audit"),
    )
