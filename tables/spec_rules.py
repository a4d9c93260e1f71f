"""Pure rules a table spec is checked against, before Spark starts.

Intervals (`7 days`), column names (plain, not reserved), the types a column must have for its
role, read from the leading word of its DDL type (a window column is a time, a partition column
is not nested, a key can be compared, a sequence orders), the merge mode's combinations, and
what an expectation's check and arguments may be. Each refusal names its key (`dedup_window`),
so the config loader can restate it with the file and the full key path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pyspark.sql import types

from tables.ddl import DdlColumn, parse_columns
from tables.errors import ConfigError, KeyPath
from tables.identifiers import key_path, shorten, validate_column_name

if TYPE_CHECKING:
    from tables.spec import TableSpec

RESERVED_PREFIX = "_lh_"
TXN_RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"

_INTERVAL = re.compile(
    r"\s*(?:interval\s+)?(\d{1,12})\s+(week|day|hour|minute|second)s?\s*", re.I | re.ASCII
)
_UNIT_SECONDS = MappingProxyType(
    {"week": 604800, "day": 86400, "hour": 3600, "minute": 60, "second": 1}
)
#: Types a time-window dedup column may have.
_TIME_TYPES = frozenset({"TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "DATE"})
#: Types Delta cannot partition by, and types a MERGE cannot match keys on.
_NESTED_TYPES = frozenset({"ARRAY", "MAP", "STRUCT", "VARIANT"})
_UNMATCHABLE_TYPES = frozenset({"MAP", "VARIANT"})
#: Types whose order is the order of versions: numbers and times (a string orders by its text).
_SEQUENCE_TYPES = _TIME_TYPES | frozenset(
    {
        "TINYINT",
        "BYTE",
        "SMALLINT",
        "SHORT",
        "INT",
        "INTEGER",
        "BIGINT",
        "LONG",
        "DECIMAL",
        "DEC",
        "NUMERIC",
        "FLOAT",
        "REAL",
        "DOUBLE",
    }
)


def parse_interval(text: str, *, positive: bool = False) -> timedelta:
    """Parse a Delta-style interval such as `interval 7 days` or `36 hours`.

    With `positive`, zero is refused too: a zero replay or dedup window would switch off what
    it guards (vacuum's floor, the window MERGE) without saying so.
    """
    match = _INTERVAL.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ConfigError(f"invalid interval {shorten(text)} (expected e.g. '7 days')")
    amount, unit = int(match.group(1)), match.group(2).lower()
    try:
        interval = timedelta(seconds=amount * _UNIT_SECONDS[unit])
    except OverflowError:
        raise ConfigError(f"interval {shorten(text)} is too long") from None
    if positive and interval <= timedelta(0):
        raise ConfigError(f"interval {shorten(text)} must be longer than zero")
    return interval


def refusal(owner: str, key: str | KeyPath, reason: str) -> ConfigError:
    """A ConfigError about `key` of `owner` (`table events`), which the config loader restates
    with the file and the full key path."""
    path = (key,) if isinstance(key, str) else key
    return ConfigError(f"{owner}: {key_path(path)}: {reason}", key=path, reason=reason)


def check_column(owner: str, key: str, name: str) -> None:
    """Refuse a column name that is not a plain identifier, or uses the reserved prefix."""
    try:
        validate_column_name(name)
    except ConfigError as exc:
        raise refusal(owner, key, exc.reason) from None
    if name.lower().startswith(RESERVED_PREFIX):
        raise refusal(owner, key, f"{shorten(name)} uses the reserved prefix {RESERVED_PREFIX}")


def spark_type_names() -> frozenset[str]:
    """The names of pyspark's data type classes (`StringType`, `DoubleType`, ...), pure Python."""

    return frozenset(
        name
        for name, value in vars(types).items()
        if isinstance(value, type)
        and issubclass(value, types.DataType)
        and name.endswith("Type")
        and not name.startswith("_")
        and name not in ("DataType", "AtomicType", "NumericType", "IntegralType", "FractionalType")
    )


def not_in_schema(name: str, columns: Mapping[str, DdlColumn]) -> str:
    """The reason for a named column the schema lacks, with the close match if case differs."""
    close = [c for c in columns if c.lower() == name.lower()]
    hint = f" (did you mean {close[0]!r}? names match exactly)" if close else ""
    listed = ", ".join(shorten(c, 30) for c in list(columns)[:20])
    return f"column {shorten(name)} is not in the schema{hint}; the schema has: {listed}"


def check_types(owner: str, spec: TableSpec, columns: Mapping[str, DdlColumn]) -> None:
    """The type checks that need only a type's leading word: window, partition and key columns."""
    typed = (
        ("dedup_column", spec.dedup_column, _TIME_TYPES, "a window needs a timestamp or date"),
        (
            "sequence_by",
            spec.sequence_by,
            _SEQUENCE_TYPES,
            "versions are ordered by a number, timestamp or date",
        ),
    )
    for key, column, kinds, need in typed:
        kind = columns[column].base_type if column is not None else None
        if column is not None and kind not in kinds:
            raise refusal(owner, key, f"{column} is {kind or 'untyped'}; {need} column")
    for column in spec.partition_by:
        if columns[column].base_type in _NESTED_TYPES:
            raise refusal(
                owner, "partition_by", f"cannot partition by {column}, a nested or variant type"
            )
    for column in spec.keys:
        if columns[column].base_type in _UNMATCHABLE_TYPES:
            raise refusal(owner, "keys", f"{column} is a map or variant: keys must be comparable")


def validate_merge(spec: TableSpec) -> None:
    """Check the merge mode: `upsert` needs `sequence_by`; its keys apply to `upsert` only."""
    owner = f"table {spec.name}"
    if spec.merge not in ("insert", "upsert"):
        raise refusal(owner, "merge", f"must be 'insert' or 'upsert', got {shorten(spec.merge)}")
    if spec.merge == "insert":
        for key in ("sequence_by", "delete_when", "tombstone_retention"):
            if getattr(spec, key) is not None:
                raise refusal(owner, key, "applies to merge = 'upsert' only")
        return
    retention = spec.tombstone_retention
    if retention is not None and retention <= spec.replay_window:
        raise refusal(
            owner,
            "tombstone_retention",
            f"{span_text(retention)} is not longer than the replay window "
            f"({span_text(spec.replay_window)}): a batch replayed inside the window could bring "
            "back a key whose delete is no longer remembered",
        )
    if spec.sequence_by is None:
        raise refusal(
            owner,
            "sequence_by",
            "merge = 'upsert' needs sequence_by, the column that orders the versions of a key",
        )
    check_column(owner, "sequence_by", spec.sequence_by)
    if spec.sequence_by in spec.keys:
        raise refusal(owner, "sequence_by", f"{spec.sequence_by} is a record key column")
    if spec.dedup != "batch":
        raise refusal(
            owner, "dedup", "applies to merge = 'insert' only: an upsert matches every row by key"
        )
    if spec.audit_policy == "repair":
        raise refusal(
            owner,
            "audit_policy",
            "repair keeps a key's first-landed copy, not its newest version; an upsert table "
            "holds one row per key (use warn or fail)",
        )
    rule = spec.delete_when
    if rule is not None and (not isinstance(rule, str) or not rule.strip()):
        raise refusal(owner, "delete_when", "is empty; give a SQL condition such as \"op = 'd'\"")


def validate_dedup(spec: TableSpec) -> None:
    """Check the dedup scope's keys: `window` needs a time column and a positive window, others
    none (the scope's own value is checked with the other choices, in `TableSpec`)."""
    owner = f"table {spec.name}"
    if spec.dedup != "window":
        for key in ("dedup_column", "dedup_window"):
            if getattr(spec, key) is not None:
                raise refusal(owner, key, "applies to dedup = 'window' only")
        return
    if spec.dedup_column is None or spec.dedup_window is None:
        key = "dedup_column" if spec.dedup_column is None else "dedup_window"
        raise refusal(owner, key, "dedup = 'window' needs dedup_column and dedup_window")
    check_column(owner, "dedup_column", spec.dedup_column)
    if spec.dedup_window <= timedelta(0):
        raise refusal(owner, "dedup_window", "must be positive")


def validate_history(spec: TableSpec) -> None:
    """Check the history mode: `scd2` is an upsert table's, and names the columns it tracks once.

    An SCD type 2 table keeps every delete as history, so its deletes do not expire
    (`tombstone_retention` is refused), and `track_history_columns` / `except_columns` (one or
    the other) may not name a key or the sequence column, which every version carries anyway.
    """
    owner = f"table {spec.name}"
    if spec.history not in ("scd1", "scd2"):
        raise refusal(owner, "history", f"must be 'scd1' or 'scd2', got {shorten(spec.history)}")
    tracking = [
        ("track_history_columns", spec.track_history_columns),
        ("except_columns", spec.except_columns),
    ]
    if spec.history == "scd1":
        for key, columns in tracking:
            if columns:
                raise refusal(owner, key, "applies to history = 'scd2' only")
        return
    if spec.merge != "upsert":
        raise refusal(
            owner, "history", "'scd2' keeps the versions of an upsert table; set merge = 'upsert'"
        )
    if spec.tombstone_retention is not None:
        raise refusal(
            owner,
            "tombstone_retention",
            "does not apply to history = 'scd2': its deletes are part of the history it keeps",
        )
    if spec.track_history_columns and spec.except_columns:
        raise refusal(
            owner, "except_columns", "give track_history_columns or except_columns, not both"
        )
    for key, columns in tracking:
        for column in columns:
            check_column(owner, key, column)
            if column in spec.keys or column == spec.sequence_by:
                raise refusal(
                    owner, key, f"{column} is a key or the sequence column; every version has it"
                )
    try:
        names = [c.name for c in parse_columns(spec.schema_ddl)]
    except ConfigError:
        return  # the schema's own check names the fault
    left = set(names) - {*spec.keys, str(spec.sequence_by), *spec.except_columns}
    if spec.except_columns and not left:
        raise refusal(
            owner,
            "except_columns",
            "leaves no column to track: every version would fold into the one before it",
        )


def validate_expectation_params(check: str, params: Mapping[str, Any], where: str) -> None:
    """Check the arguments a check needs are there and have the right kind."""
    if check == "between":
        bounds = {key: params.get(key) for key in ("min", "max")}
        if all(b is None for b in bounds.values()):
            raise refusal(where, "min", "needs min, max or both")
        for key, bound in bounds.items():
            if bound is not None and (
                isinstance(bound, bool) or not isinstance(bound, int | float)
            ):
                raise refusal(where, key, "min and max must be numbers")
        low, high = bounds["min"], bounds["max"]
        if low is not None and high is not None and low > high:
            raise refusal(where, "max", f"max {high} is below min {low}: no value could pass")
    if check == "in_set":
        values = params.get("values")
        if not isinstance(values, list | tuple) or not values:
            raise refusal(where, "values", "values must be a non-empty list")
        if any(isinstance(v, list | tuple | Mapping) for v in values):
            raise refusal(where, "values", "values must be strings, numbers or booleans")
    if check == "regex":
        pattern = params.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise refusal(where, "pattern", "pattern must be a non-empty string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise refusal(where, "pattern", f"invalid pattern {shorten(pattern)}: {exc}") from exc
    if check == "column_type":
        kind = params.get("type")
        if not isinstance(kind, str) or kind not in spark_type_names():
            raise refusal(
                where,
                "type",
                f"type must be a Spark type name such as 'DoubleType', got {shorten(kind)}",
            )


#: Table properties whose retention must cover the replay window, and what a shorter one breaks.
WINDOW_RETENTIONS = MappingProxyType(
    {
        # Delta drops a SetTransaction marker once it is older than this: a batch replayed after
        # that would no longer be recognised as committed and would be written again.
        TXN_RETENTION_PROPERTY: "replayed batches older than it would be written twice",
        # Delta's log clean-up removes commits (and their ledger entries) older than this: a batch
        # inside the window could no longer be found to replay, nor its content verified.
        LOG_RETENTION_PROPERTY: "batches older than it lose their ledger entries and cannot be "
        "replayed or verified",
    }
)


def span_text(span: timedelta) -> str:
    """`7 days`, `36 hours`, or Python's own text for a span that is neither whole."""
    seconds = int(span.total_seconds())
    if span == timedelta(seconds=seconds) and seconds % 86_400 == 0:
        return f"{seconds // 86_400} day{'s' if seconds != 86_400 else ''}"
    if span == timedelta(seconds=seconds) and seconds % 3_600 == 0:
        return f"{seconds // 3_600} hour{'s' if seconds != 3_600 else ''}"
    return str(span)


def validate_txn_retention(
    properties: Mapping[str, str], replay_window: timedelta, owner: str = "table"
) -> None:
    """Refuse a marker or log retention (table properties) shorter than the replay window.

    What a shorter one would break is in `WINDOW_RETENTIONS`.
    """
    for name, breaks in WINDOW_RETENTIONS.items():
        value = properties.get(name)
        if value is None:
            continue
        key = ("properties", name)
        try:
            retention = parse_interval(value)
        except ConfigError as exc:
            raise refusal(owner, key, exc.reason) from None
        if retention < replay_window:
            raise refusal(
                owner,
                key,
                f"{name}={shorten(value)} is shorter than the replay window "
                f"({span_text(replay_window)}): "
                f"{breaks}",
            )
