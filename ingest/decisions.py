"""The commit path's decisions, as small pure functions tested without Spark.

Every branch the exactly-once protocol takes is decided here from plain values (batch ids, the
log's marker, hashes, error kinds); `ingest.commit` only gathers those values and carries out the
decision. See docs/DESIGN.md for the protocol these encode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tables.errors import ErrorKind
from tables.identifiers import quote_identifier, sql_string_literal
from tables.spec import APP_ID_COLUMN, BATCH_ID_COLUMN, DedupScope

BatchAction = Literal["commit", "skip", "rewound"]
#: The key of a source record that holds its fingerprint (`ingest.sources`).
FINGERPRINT_KEY = "fingerprint"

TARGET_ALIAS = "t"
SOURCE_ALIAS = "s"


def decide_batch(batch_id: int, committed: int | None, *, fail_on_rewind: bool) -> BatchAction:
    """Decide what to do with a batch given the last batch id the log holds for its app.

    - nothing committed yet, or a newer batch: commit it;
    - the batch the log already holds: a retry (say, after a crash before the stream's
      checkpoint), skip it;
    - an older batch: a replay when called directly (skip it), but for a stream it means the
      checkpoint was lost or rewound, which must stop the stream (`rewound`).
    """
    if committed is None or batch_id > committed:
        return "commit"
    if batch_id == committed or not fail_on_rewind:
        return "skip"
    return "rewound"


def is_checkpoint_lost(checkpoint_has_offsets: bool, committed: int | None) -> bool:
    """True when the log holds batches for an app whose stream checkpoint is empty.

    A fresh checkpoint restarts batch ids at 0; if the table already holds batches for the same
    app id, those ids would collide with committed ones. A marker of -1 (an explicit reset to
    "nothing committed") lets a fresh checkpoint start.
    """
    return committed is not None and committed >= 0 and not checkpoint_has_offsets


def is_content_conflict(incoming_hash: str, committed_hash: str | None) -> bool:
    """True when a batch id arrives again with content that differs from what was committed."""
    return bool(committed_hash) and incoming_hash != committed_hash


def is_same_fingerprint(
    incoming: Mapping[str, Any] | None, recorded: Mapping[str, Any] | None
) -> bool:
    """True if a re-run batch's source fingerprint equals the one its ledger entry recorded.

    A fingerprint stands for the content (the files read with their sizes and modification times,
    or Kafka offset ranges, which never change); equal ones settle a skip without reading the
    batch. Anything else (no fingerprint on either side, or a different one, which may still be
    the same content) is for the content hash to decide.
    """
    found = (incoming or {}).get(FINGERPRINT_KEY)
    return isinstance(found, str) and bool(found) and found == (recorded or {}).get(FINGERPRINT_KEY)


def should_retry(kind: ErrorKind, attempt: int, max_attempts: int) -> bool:
    """Retry transient errors until `max_attempts` attempts have been made; never terminal ones."""
    return kind == "transient" and attempt < max_attempts


def backoff_seconds(
    attempt: int, *, jitter: float = 1.0, base: float = 0.2, cap: float = 5.0
) -> float:
    """Exponential backoff before retry `attempt` (1-based), capped, scaled by `jitter`.

    Writers that lost the same commit race and waited the same time would race again; a
    `jitter` drawn from [0.5, 1.0] per retry spreads them out.
    """
    return float(min(cap, base * 2 ** (attempt - 1)) * jitter)


def commit_landed(committed: int | None, batch_id: int) -> bool:
    """After a failed commit call, True if the log shows the batch as committed anyway."""
    return committed is not None and committed >= batch_id


def batch_scope(app_id: str, batch_id: int) -> str:
    """The target-side condition selecting one batch's rows by their lineage columns."""
    target = quote_identifier(TARGET_ALIAS)
    return (
        f"{target}.{quote_identifier(APP_ID_COLUMN)} = {sql_string_literal(app_id)} AND "
        f"{target}.{quote_identifier(BATCH_ID_COLUMN)} = {int(batch_id)}"
    )


def key_match(keys: tuple[str, ...]) -> str:
    """The MERGE ON clause's null-safe match of each record key column, target to source."""
    target = quote_identifier(TARGET_ALIAS)
    source = quote_identifier(SOURCE_ALIAS)
    return " AND ".join(
        f"{target}.{quote_identifier(k)} <=> {source}.{quote_identifier(k)}" for k in keys
    )


def merge_condition(keys: tuple[str, ...], app_id: str, batch_id: int) -> str:
    """The MERGE ON clause: literal app id and batch id, then a null-safe match on each key.

    The literals let Delta skip every target file whose lineage statistics exclude this batch, so
    the MERGE reads files of this batch only, whatever the size of the table.
    """
    return f"{batch_scope(app_id, batch_id)} AND {key_match(keys)}"


@dataclass(frozen=True)
class TimeWindow:
    """The window of a `window`-scoped MERGE: a fixed span that ends at the batch's newest time.

    Anchoring at the newest time bounds the rows read however old a straggler in the batch is;
    a resend older than the window is not matched (the post-commit audit is what catches it).
    `newest` is text in the session time zone, so the SQL literal means the same instant.
    """

    column: str
    is_date: bool
    newest: str
    seconds: int


def window_bounds(window: TimeWindow) -> tuple[str, str]:
    """SQL literals of the lower and upper bound; constant, so file skipping can use them."""
    newest = sql_string_literal(window.newest)
    if window.is_date:
        days = -(-window.seconds // 86400)
        return f"date_sub(DATE {newest}, {days})", f"DATE {newest}"
    return f"TIMESTAMP {newest} - INTERVAL {window.seconds} SECONDS", f"TIMESTAMP {newest}"


def dedup_scope(
    scope: DedupScope, app_id: str, batch_id: int, window: TimeWindow | None
) -> str | None:
    """The target-side part of the MERGE ON clause: which rows a key may match (None: any row).

    - `batch`: the batch's own rows only (`batch_scope`): retries and replays are no-ops;
    - `table`: any row with the same record key: a resend in a later batch lands once, at the
      cost of reading every file whose key statistics may hold the batch's keys;
    - `window`: rows whose dedup column lies within the window that ends at the batch's newest
      time, so file skipping on that column bounds the cost; a batch without any time value
      falls back to `batch`.
    """
    if scope == "batch" or (scope == "window" and window is None):
        return batch_scope(app_id, batch_id)
    if scope == "table" or window is None:
        return None
    lower, upper = window_bounds(window)
    column = f"{quote_identifier(TARGET_ALIAS)}.{quote_identifier(window.column)}"
    return f"{column} >= {lower} AND {column} <= {upper}"


def dedup_condition(
    scope: DedupScope,
    keys: tuple[str, ...],
    app_id: str,
    batch_id: int,
    window: TimeWindow | None,
) -> str:
    """The MERGE ON clause for a table's dedup scope: its `dedup_scope`, then each key matched."""
    within = dedup_scope(scope, app_id, batch_id, window)
    return key_match(keys) if within is None else f"{within} AND {key_match(keys)}"


def uses_high_water(scope: DedupScope) -> bool:
    """True if the scope can commit by blind append, so its app's high-water mark is read.

    Under `batch` dedup the MERGE matches only the batch's own rows; other scopes match rows of
    other batches and always MERGE, so they never read (or seed) the mark.
    """
    return scope == "batch"


def should_append(scope: DedupScope, batch_id: int, high_water: int | None) -> bool:
    """True if the batch's MERGE cannot match a row, so a blind append with its marker is the same.

    Under `batch` dedup the MERGE matches only rows of this app id and batch id. None exist when
    the batch id is above every batch id the app has rows for (`high_water`, None: no rows), which
    holds for every new batch unless a reset moved the marker back over batches still in the
    table. Other scopes match rows of other batches, so they always MERGE.
    """
    return uses_high_water(scope) and (high_water is None or batch_id > high_water)


#: A batch Spark estimates below this many bytes is classified, counted and written by one task
#: (`is_one_task_batch`): an eighth of a file split Spark reads as one task
#: (`spark.sql.files.maxPartitionBytes`, 128 MiB).
ONE_TASK_BYTES = 16 * 1024 * 1024


def is_one_task_batch(estimated_bytes: int | None) -> bool:
    """True if a batch is small enough for one task: classified, counted and written in one stage.

    With one input partition Spark needs no shuffle for the batch's duplicate search (a window
    over the record key) nor for its figures (one aggregate), and the write makes one file: one
    stage where a batch of two partitions took three, and half the data files in the table's
    state. A batch whose size Spark cannot tell (None, or its very large default) keeps its
    partitions.
    """
    return estimated_bytes is not None and estimated_bytes < ONE_TASK_BYTES


def is_audit_final(read_version: int | None, committed_version: int | None) -> bool:
    """True if no other commit landed between the version an audit read and the batch's commit."""
    return (
        read_version is not None
        and committed_version is not None
        and committed_version == read_version + 1
    )


def lost_checkpoint_fixes(pipeline: str, source_kind: str) -> str:
    """The fixes for a lost checkpoint, as the end of its error line, best first.

    A Kafka pipeline's ledger records each batch's offset ranges, so a new checkpoint can
    start right after them; a file source's ledger names files, not what a listing would skip.
    """
    fixes = "restore the checkpoint, or run under a new app id"
    if source_kind == "kafka":
        return (
            f"run `lakehouse ingest {pipeline} --resume-from-log` to start a new checkpoint "
            f"after the offsets the ledger records, {fixes}"
        )
    return fixes
