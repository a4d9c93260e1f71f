"""The `lakehouse.toml` file: tables and pipelines declared once, checked before Spark starts.

Loading is pure Python: structure, names, keys and intervals are validated here so that a typo
fails in milliseconds with one line naming the key, not after a JVM start. Relative paths are
resolved against the file's own directory.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ingest.kafka import KafkaSource
from ingest.sources import FileSource
from ingest.triggers import parse_trigger
from tables.errors import ConfigError
from tables.identifiers import validate_app_id, validate_table_name
from tables.spec import DEFAULT_REPLAY_WINDOW, ExpectationSpec, TableSpec, parse_interval

DEFAULT_CONFIG = Path("lakehouse.toml")
_TOP_KEYS = {"lakehouse", "tables", "pipelines"}
_SETTINGS_KEYS = {"home", "replay_window"}
_TABLE_KEYS = {
    "schema",
    "keys",
    "partition_by",
    "properties",
    "dedup",
    "dedup_column",
    "dedup_window",
    "expectations",
    "audit_policy",
}
_EXPECTATION_KEYS = {"check", "column", "action", "min", "max", "values", "pattern", "type"}
_PIPELINE_KEYS = {"table", "app_id", "trigger", "checkpoint", "source"}
_SOURCE_KEYS = {"kind", "format", "path", "options", "max_files_per_trigger"}
_KAFKA_KEYS = {
    "kind",
    "bootstrap_servers",
    "topic",
    "pattern",
    "starting_offsets",
    "value_format",
    "options",
    "max_offsets_per_trigger",
}


@dataclass(frozen=True)
class PipelineSpec:
    """A stream into a table under one app id: where it reads, how often, where it checkpoints."""

    name: str
    table: str
    app_id: str
    source: FileSource | KafkaSource
    trigger: str
    checkpoint: str


@dataclass(frozen=True)
class LakehouseConfig:
    """A whole config file: settings, tables by name, pipelines by name."""

    path: Path | None
    home: Path
    replay_window: timedelta
    tables: Mapping[str, TableSpec]
    pipelines: Mapping[str, PipelineSpec]

    def table(self, name: str) -> TableSpec:
        """The spec of a declared table, or a ConfigError listing the declared ones."""
        if name not in self.tables:
            raise ConfigError(
                f"table {name!r} is not declared in {self._where()}{self._list(self.tables)}"
            )
        return self.tables[name]

    def pipeline(self, name: str | None) -> PipelineSpec:
        """The named pipeline, or the only one when no name is given."""
        if name is None:
            if len(self.pipelines) != 1:
                raise ConfigError(
                    f"{self._where()} declares {len(self.pipelines)} pipelines: name one"
                    f"{self._list(self.pipelines)}"
                )
            return next(iter(self.pipelines.values()))
        if name not in self.pipelines:
            raise ConfigError(
                f"pipeline {name!r} is not declared in {self._where()}{self._list(self.pipelines)}"
            )
        return self.pipelines[name]

    def _where(self) -> str:
        return str(self.path) if self.path else "the configuration"

    @staticmethod
    def _list(names: Mapping[str, object]) -> str:
        return f" (declared: {', '.join(sorted(names))})" if names else " (none declared)"


def load_config(path: Path | None = None, *, required: bool = True) -> LakehouseConfig:
    """Load and validate a config file; without one (and not `required`), return defaults."""
    chosen = path or DEFAULT_CONFIG
    if not chosen.exists():
        if required or path is not None:
            raise ConfigError(
                f"config file {chosen} not found (pass --config or create lakehouse.toml)"
            )
        return parse_config({}, base=Path.cwd(), path=None)
    try:
        data = tomllib.loads(chosen.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{chosen}: invalid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{chosen}: cannot read: {exc.strerror}") from exc
    return parse_config(data, base=chosen.resolve().parent, path=chosen)


def parse_config(data: Mapping[str, Any], *, base: Path, path: Path | None) -> LakehouseConfig:
    """Validate a parsed TOML document into a LakehouseConfig."""
    where = str(path) if path else "config"
    _check_keys(data, _TOP_KEYS, where)
    settings = _section(data, "lakehouse", where)
    _check_keys(settings, _SETTINGS_KEYS, f"{where} [lakehouse]")
    home = Path(_resolve(base, str(settings.get("home") or _default_home())))
    replay_window = (
        parse_interval(str(settings["replay_window"]))
        if "replay_window" in settings
        else DEFAULT_REPLAY_WINDOW
    )
    tables = {
        name: _table(name, body, replay_window, f"{where} [tables.{name}]")
        for name, body in _section(data, "tables", where).items()
    }
    pipelines = {
        name: _pipeline(name, body, tables, home, base, f"{where} [pipelines.{name}]")
        for name, body in _section(data, "pipelines", where).items()
    }
    return LakehouseConfig(path, home, replay_window, tables, pipelines)


def _table(name: str, body: Any, replay_window: timedelta, where: str) -> TableSpec:
    body = _mapping(body, where)
    _check_keys(body, _TABLE_KEYS, where)
    for required in ("schema", "keys"):
        if required not in body:
            raise ConfigError(f"{where}: missing required key {required!r}")
    return TableSpec(
        name=validate_table_name(name),
        schema_ddl=_string(body["schema"], f"{where} schema"),
        keys=_strings(body["keys"], f"{where} keys"),
        partition_by=_strings(body.get("partition_by", []), f"{where} partition_by"),
        properties={str(k): str(v) for k, v in _mapping(body.get("properties", {}), where).items()},
        replay_window=replay_window,
        dedup=_string(body.get("dedup", "batch"), f"{where} dedup"),  # type: ignore[arg-type]
        dedup_column=(
            _string(body["dedup_column"], f"{where} dedup_column")
            if "dedup_column" in body
            else None
        ),
        dedup_window=(
            parse_interval(_string(body["dedup_window"], f"{where} dedup_window"))
            if "dedup_window" in body
            else None
        ),
        expectations=_expectations(name, body.get("expectations", []), where),
        audit_policy=_string(body.get("audit_policy", "warn"), f"{where} audit_policy"),  # type: ignore[arg-type]
    )


def _expectations(table: str, value: Any, where: str) -> tuple[ExpectationSpec, ...]:
    """Parse `[[tables.<name>.expectations]]` entries: check, column, action and arguments."""
    if not isinstance(value, list):
        raise ConfigError(f"{where} expectations: expected an array of tables")
    parsed = []
    for index, raw in enumerate(value):
        at = f"{where} expectations[{index}]"
        body = _mapping(raw, at)
        _check_keys(body, _EXPECTATION_KEYS, at)
        for required in ("check", "column"):
            if required not in body:
                raise ConfigError(f"{at}: missing required key {required!r}")
        parsed.append(
            ExpectationSpec(
                table=table,
                check=_string(body["check"], f"{at} check"),  # type: ignore[arg-type]
                column=_string(body["column"], f"{at} column"),
                action=_string(body.get("action", "warn"), f"{at} action"),  # type: ignore[arg-type]
                params={k: v for k, v in body.items() if k not in ("check", "column", "action")},
            )
        )
    names = [e.name for e in parsed]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{where} expectations: declared twice: {repeated}")
    return tuple(parsed)


def _pipeline(
    name: str,
    body: Any,
    tables: Mapping[str, TableSpec],
    home: Path,
    base: Path,
    where: str,
) -> PipelineSpec:
    body = _mapping(body, where)
    _check_keys(body, _PIPELINE_KEYS, where)
    for required in ("table", "source"):
        if required not in body:
            raise ConfigError(f"{where}: missing required key {required!r}")
    table = _string(body["table"], f"{where} table")
    if table not in tables:
        raise ConfigError(f"{where}: table {table!r} is not declared under [tables]")
    app_id = validate_app_id(_string(body.get("app_id", name), f"{where} app_id"))
    trigger = _string(body.get("trigger", "available-now"), f"{where} trigger")
    parse_trigger(trigger)
    source = _mapping(body["source"], f"{where}.source")
    kind = source.get("kind", "files")
    if kind == "kafka":
        stream_source: FileSource | KafkaSource = _kafka_source(source, f"{where}.source")
    elif kind == "files":
        stream_source = _file_source(source, base, f"{where}.source")
    else:
        raise ConfigError(f"{where}.source: unsupported kind {kind!r} (use 'files' or 'kafka')")
    checkpoint = body.get("checkpoint")
    checkpoint_path = (
        _resolve(base, _string(checkpoint, f"{where} checkpoint"))
        if checkpoint
        else str(home / "checkpoints" / app_id)
    )
    return PipelineSpec(name, table, app_id, stream_source, trigger, checkpoint_path)


def _file_source(source: Mapping[str, Any], base: Path, where: str) -> FileSource:
    _check_keys(source, _SOURCE_KEYS, where)
    for required in ("format", "path"):
        if required not in source:
            raise ConfigError(f"{where}: missing required key {required!r}")
    max_files = source.get("max_files_per_trigger")
    if max_files is not None and not isinstance(max_files, int):
        raise ConfigError(f"{where}: max_files_per_trigger must be an integer")
    return FileSource(
        path=_resolve(base, _string(source["path"], f"{where} path")),
        format=_string(source["format"], f"{where} format"),  # type: ignore[arg-type]
        options={str(k): str(v) for k, v in _mapping(source.get("options", {}), where).items()},
        max_files_per_trigger=max_files,
    )


def _kafka_source(source: Mapping[str, Any], where: str) -> KafkaSource:
    """A Kafka source; secret option values may be written as `${env:NAME}` (Kafka's provider)."""
    _check_keys(source, _KAFKA_KEYS, where)
    if "bootstrap_servers" not in source:
        raise ConfigError(f"{where}: missing required key 'bootstrap_servers'")
    limit = source.get("max_offsets_per_trigger")
    if limit is not None and not isinstance(limit, int):
        raise ConfigError(f"{where}: max_offsets_per_trigger must be an integer")
    try:
        return KafkaSource(
            bootstrap_servers=_string(source["bootstrap_servers"], f"{where} bootstrap_servers"),
            topic=_string(source["topic"], f"{where} topic") if "topic" in source else None,
            pattern=_string(source["pattern"], f"{where} pattern") if "pattern" in source else None,
            starting_offsets=_string(
                source.get("starting_offsets", "earliest"), f"{where} starting_offsets"
            ),
            value_format=_string(source.get("value_format", "json"), f"{where} value_format"),  # type: ignore[arg-type]
            options={str(k): str(v) for k, v in _mapping(source.get("options", {}), where).items()},
            max_offsets_per_trigger=limit,
        )
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _default_home() -> str:
    return os.environ.get("LAKEHOUSE_HOME") or ".lakehouse"


def _resolve(base: Path, value: str) -> str:
    """An absolute location: URIs (s3://, abfss://, dbfs:/) as given, paths against `base`."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", value):
        return value
    candidate = Path(value).expanduser()
    return str(candidate if candidate.is_absolute() else (base / candidate).resolve())


def _check_keys(body: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _section(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    return _mapping(data.get(key, {}), f"{where} [{key}]")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a non-empty string")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings")
    return tuple(value)
