"""Reading `lakehouse.toml`: every section and key, with its TOML type, into specs.

Loading is pure Python, so a typo fails in milliseconds with one line naming the file and the
key, not after a JVM start. Relative paths are resolved against the file's own directory. The
checks between sections (duplicate app ids, overlapping locations) are in `checks.py`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args

from ingest.config.checks import check_config
from ingest.config.model import LakehouseConfig
from ingest.config.pipelines import PipelinePlaces, pipeline_of
from ingest.config.places import catalog_of, limits_of, warehouse_of
from ingest.config.where import (
    Where,
    check_keys,
    choice,
    flag,
    interval,
    local_path,
    located,
    mapping,
    options,
    require,
    string,
    strings,
)
from tables.errors import ConfigError
from tables.identifiers import (
    validate_table_name,
)
from tables.maintenance_policy import MaintenancePolicy
from tables.record_rules import (
    DEFAULT_MAX_RECORD_BYTES,
    RecordRules,
    TimestampUnit,
    parse_size,
)
from tables.spec import (
    DEFAULT_REPLAY_WINDOW,
    AuditPolicy,
    DedupScope,
    ExpectationSpec,
    History,
    MergeMode,
    SchemaEvolution,
    TableSpec,
    UnknownFields,
)

DEFAULT_CONFIG = Path("lakehouse.toml")
_TOP_KEYS = frozenset({"lakehouse", "tables", "pipelines"})
_SETTINGS_KEYS = frozenset({"home", "replay_window", "catalog", "warehouse", "storage", "queries"})
_TABLE_KEYS = frozenset(
    {
        "schema",
        "keys",
        "partition_by",
        "properties",
        "dedup",
        "dedup_column",
        "dedup_window",
        "expectations",
        "audit_policy",
        "unknown_fields",
        "schema_evolution",
        "type_widening",
        "merge",
        "sequence_by",
        "delete_when",
        "tombstone_retention",
        "history",
        "track_history_columns",
        "except_columns",
        "max_record_bytes",
        "timestamp_unit",
        "maintenance",
    }
)
_MAINTENANCE_KEYS = frozenset({"optimize_every", "optimize_max_files", "vacuum_every"})
_EXPECTATION_KEYS = frozenset(
    {"check", "column", "action", "min", "max", "values", "pattern", "type"}
)


def load_config(path: Path | None = None, *, required: bool = True) -> LakehouseConfig:
    """Load and validate a config file; without one (and not `required`), return defaults."""
    chosen = path or DEFAULT_CONFIG
    where = Where.of(chosen)
    if "\x00" in str(chosen):
        raise ConfigError(f"config file {where.file}: the path holds a NUL character")
    if not chosen.exists():
        if required or path is not None:
            raise ConfigError(
                f"config file {where.file} not found (pass --config or create lakehouse.toml)"
            )
        return parse_config({}, base=Path.cwd(), path=None)
    try:
        raw = chosen.read_bytes()
    except OSError as exc:
        raise where.error(f"cannot read: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise where.error(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line} (save the file as UTF-8)"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise where.error(f"invalid TOML: {exc}") from exc
    return parse_config(data, base=chosen.resolve().parent, path=chosen)


def parse_config(data: Mapping[str, Any], *, base: Path, path: Path | None) -> LakehouseConfig:
    """Validate a parsed TOML document into a LakehouseConfig."""
    root = Where.of(path)
    check_keys(data, _TOP_KEYS, root)
    settings = mapping(data.get("lakehouse", {}), root / "lakehouse")
    check_keys(settings, _SETTINGS_KEYS, root / "lakehouse")
    if "home" in settings:
        home_where = root / "lakehouse" / "home"
        home = Path(local_path(base, string(settings["home"], home_where), home_where))
    else:
        home_where = Where("$LAKEHOUSE_HOME")
        home = Path(local_path(base, os.environ.get("LAKEHOUSE_HOME") or ".lakehouse", home_where))
    replay_window = (
        interval(settings["replay_window"], root / "lakehouse" / "replay_window")
        if "replay_window" in settings
        else DEFAULT_REPLAY_WINDOW
    )
    tables = {
        name: _table(name, body, replay_window, root / "tables" / name)
        for name, body in mapping(data.get("tables", {}), root / "tables").items()
    }
    pipelines = {
        name: pipeline_of(name, body, tables, PipelinePlaces(home, base), root / "pipelines" / name)
        for name, body in mapping(data.get("pipelines", {}), root / "pipelines").items()
    }
    warehouse = warehouse_of(settings, base, root / "lakehouse")
    catalog = catalog_of(settings, warehouse, root / "lakehouse")
    limits = limits_of(settings, root / "lakehouse")
    config = LakehouseConfig(path, home, replay_window, tables, pipelines, catalog, limits)
    check_config(config, root)
    return config


def _table(name: str, body: Any, replay_window: timedelta, where: Where) -> TableSpec:
    with located(where):
        validate_table_name(name)
    body = mapping(body, where)
    check_keys(body, _TABLE_KEYS, where)
    require(body, ("schema", "keys"), where)

    def optional(key: str) -> str | None:
        return string(body[key], where / key) if key in body else None

    with located(where):
        return TableSpec(
            name=name,
            schema_ddl=string(body["schema"], where / "schema"),
            keys=strings(body["keys"], where / "keys"),
            partition_by=strings(body.get("partition_by", []), where / "partition_by"),
            properties=options(body.get("properties", {}), where / "properties"),
            replay_window=replay_window,
            dedup=choice(body.get("dedup", "batch"), where / "dedup", get_args(DedupScope)),  # type: ignore[arg-type]
            dedup_column=optional("dedup_column"),
            dedup_window=(
                interval(body["dedup_window"], where / "dedup_window")
                if "dedup_window" in body
                else None
            ),
            expectations=_expectations(name, body.get("expectations", []), where / "expectations"),
            audit_policy=choice(  # type: ignore[arg-type]
                body.get("audit_policy", "warn"), where / "audit_policy", get_args(AuditPolicy)
            ),
            unknown_fields=choice(  # type: ignore[arg-type]
                body.get("unknown_fields", "rescue"),
                where / "unknown_fields",
                get_args(UnknownFields),
            ),
            schema_evolution=choice(  # type: ignore[arg-type]
                body.get("schema_evolution", "rescue"),
                where / "schema_evolution",
                get_args(SchemaEvolution),
            ),
            type_widening=flag(body.get("type_widening", False), where / "type_widening"),
            merge=choice(body.get("merge", "insert"), where / "merge", get_args(MergeMode)),  # type: ignore[arg-type]
            sequence_by=optional("sequence_by"),
            delete_when=optional("delete_when"),
            tombstone_retention=(
                interval(body["tombstone_retention"], where / "tombstone_retention")
                if "tombstone_retention" in body
                else None
            ),
            history=choice(body.get("history", "scd1"), where / "history", get_args(History)),  # type: ignore[arg-type]
            track_history_columns=_tracked(body, where),
            except_columns=strings(body.get("except_columns", []), where / "except_columns"),
            records=_record_rules(body, where),
            maintenance=_maintenance(body.get("maintenance", {}), where / "maintenance"),
            origin=str(where),
        )


def _tracked(body: Mapping[str, Any], where: Where) -> tuple[str, ...]:
    """`track_history_columns`: absent means every column; an empty list is a mistake."""
    columns = strings(body.get("track_history_columns", []), where / "track_history_columns")
    if "track_history_columns" in body and not columns:
        raise (where / "track_history_columns").error(
            "is empty: name the columns whose change makes a new version, or leave it out to "
            "track every column"
        )
    return columns


def _maintenance(value: Any, where: Where) -> MaintenancePolicy:
    """`[tables.<name>.maintenance]`: whole numbers of batches or files, 0 (off) by default."""
    body = mapping(value, where)
    check_keys(body, _MAINTENANCE_KEYS, where)
    counts = {}
    for key in sorted(_MAINTENANCE_KEYS):
        count = body.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise (where / key).error(f"expected a whole number >= 0, got {count!r}")
        counts[key] = count
    return MaintenancePolicy(**counts)


def _record_rules(body: Mapping[str, Any], where: Where) -> RecordRules:
    """`max_record_bytes` (bytes, or a size such as "16 MiB") and `timestamp_unit`."""
    size = DEFAULT_MAX_RECORD_BYTES
    if "max_record_bytes" in body:
        try:
            size = parse_size(body["max_record_bytes"])
        except ValueError as exc:
            raise (where / "max_record_bytes").error(str(exc)) from None
    unit = body.get("timestamp_unit")
    if unit is not None:
        unit = choice(unit, where / "timestamp_unit", get_args(TimestampUnit))
    return RecordRules(max_record_bytes=size, timestamp_unit=unit)  # type: ignore[arg-type]


def _expectations(table: str, value: Any, where: Where) -> tuple[ExpectationSpec, ...]:
    """Parse `[[tables.<name>.expectations]]` entries: check, column, action and arguments."""
    if not isinstance(value, list):
        raise where.error("expected an array of tables ([[tables.NAME.expectations]])")
    parsed = []
    for index, raw in enumerate(value):
        at = where / index
        body = mapping(raw, at)
        check_keys(body, _EXPECTATION_KEYS, at)
        require(body, ("check", "column"), at)
        with located(at):
            parsed.append(
                ExpectationSpec(
                    table=table,
                    check=string(body["check"], at / "check"),  # type: ignore[arg-type]
                    column=string(body["column"], at / "column"),
                    action=string(body.get("action", "warn"), at / "action"),  # type: ignore[arg-type]
                    params={
                        k: v for k, v in body.items() if k not in ("check", "column", "action")
                    },
                )
            )
    seen: dict[str, int] = {}
    for index, expectation in enumerate(parsed):
        if expectation.name in seen:
            raise (where / index).error(
                f"{expectation.name} is declared twice (also at [{seen[expectation.name]}])"
            )
        seen[expectation.name] = index
    return tuple(parsed)
