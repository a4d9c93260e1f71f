"""Reading `[pipelines.*]` of `lakehouse.toml`: a pipeline's source, trigger, checkpoint and
target: one table (`table`), or many chosen per record (`route_by`, `routes`, `dead_letter`).

Pure Python, like the rest of the loader: a mistake is one line naming the file and the key.
Whether a route expression reads each target's records is checked when the pipeline starts,
with Spark (`ingest.routing.Routing.assert_resolves`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_args

from ingest.config.model import PipelineSpec
from ingest.config.where import (
    Where,
    check_keys,
    choice,
    integer,
    located,
    location,
    mapping,
    options,
    require,
    string,
    strings,
)
from ingest.routing import Route, Routing
from ingest.sources import Source
from ingest.sources.file_read import FileFormat
from ingest.sources.files import CleanSource, FileSource
from ingest.sources.kafka import KafkaSource, ValueFormat
from ingest.triggers import parse_trigger
from tables.identifiers import shorten, validate_app_id, validate_pipeline_name, validate_table_name
from tables.spec import TableSpec, quarantine_table_name

_PIPELINE_KEYS = frozenset(
    {"table", "app_id", "trigger", "checkpoint", "source", "route_by", "routes", "dead_letter"}
)
_SOURCE_KEYS = frozenset(
    {"kind", "format", "path", "options", "max_files_per_trigger", "clean_source", "archive_dir"}
)
_KAFKA_KEYS = frozenset(
    {
        "kind",
        "bootstrap_servers",
        "topic",
        "pattern",
        "starting_offsets",
        "value_format",
        "options",
        "max_offsets_per_trigger",
    }
)
#: The config keys that stand for reader options the source sets itself.
_OWNED_BY_KEY: Mapping[str, str] = MappingProxyType(
    {
        "maxfilespertrigger": "max_files_per_trigger",
        "cleansource": "clean_source",
        "sourcearchivedir": "archive_dir",
    }
)
#: Reader options the file source sets itself: a config value would be overridden silently.
_READER_OWNED = frozenset({"mode", "columnnameofcorruptrecord", "path", *_OWNED_BY_KEY})


@dataclass(frozen=True)
class PipelinePlaces:
    """Where a pipeline's relative paths start (`base`) and its default checkpoint lives."""

    home: Path
    base: Path


def pipeline_of(
    name: str, body: Any, tables: Mapping[str, TableSpec], places: PipelinePlaces, where: Where
) -> PipelineSpec:
    """One `[pipelines.NAME]` section as a PipelineSpec (its target tables declared)."""
    with located(where):
        validate_pipeline_name(name)
    body = mapping(body, where)
    check_keys(body, _PIPELINE_KEYS, where)
    require(body, ("source",), where)
    routing = _routing(name, body, tables, where)
    if routing is None:
        require(body, ("table",), where)
        table = _declared(string(body["table"], where / "table"), tables, where / "table")
    else:
        table = routing.tables[0]
    app_id = string(body.get("app_id", name), where / "app_id")
    with located(where / "app_id"):
        validate_app_id(app_id)
    trigger = string(body.get("trigger", "available-now"), where / "trigger")
    with located(where / "trigger"):
        parse_trigger(trigger)
    source_where = where / "source"
    source = mapping(body["source"], source_where)
    kind = choice(source.get("kind", "files"), source_where / "kind", ("files", "kafka"))
    with located(source_where):
        stream_source: Source = (
            _kafka_source(source, source_where)
            if kind == "kafka"
            else _file_source(source, places.base, source_where)
        )
    checkpoint = (
        location(
            places.base, string(body["checkpoint"], where / "checkpoint"), where / "checkpoint"
        )
        if "checkpoint" in body
        else str(places.home / "checkpoints" / app_id)
    )
    return PipelineSpec(
        name,
        table,
        app_id,
        stream_source,
        trigger,
        checkpoint,
        config_file=where.file,
        routing=routing,
    )


def _declared(table: str, tables: Mapping[str, TableSpec], where: Where) -> str:
    """`table` as declared under [tables] (its declared spelling), or the error naming `where`."""
    if table not in tables:
        declared = ", ".join(sorted(tables)) or "none"
        raise where.error(
            f"table {shorten(table)} is not declared under [tables] (declared: {declared})"
        )
    return tables[table].name


def _routing(
    name: str, body: Mapping[str, Any], tables: Mapping[str, TableSpec], where: Where
) -> Routing | None:
    """A routed pipeline's routes (`route_by`, `routes`, `dead_letter`), or None for one table."""
    routed = [key for key in ("route_by", "routes", "dead_letter") if key in body]
    if not routed:
        return None
    if "table" in body:
        raise (where / routed[0]).error(
            "a pipeline writes one table (`table`) or routes its records (`route_by` and "
            "`routes`), not both"
        )
    require(body, ("route_by", "routes"), where)
    expression = string(body["route_by"], where / "route_by")
    if not expression.strip():
        raise (where / "route_by").error("must be a column name or a SQL expression")
    routes: list[Route] = []
    for table, values in mapping(body["routes"], where / "routes").items():
        at = where / "routes" / table
        declared = _declared(table, tables, at)
        taken = strings(values, at)
        if not taken:
            raise at.error("names no route value (give a string or a list of strings)")
        routes.append(Route(declared, tuple(taken)))
    if not routes:
        raise (where / "routes").error("names no target table")
    seen: dict[str, str] = {}
    for route in routes:
        for value in route.values:
            if value in seen:
                raise (where / "routes" / route.table).error(
                    f"route value {value!r} also sends records to table {seen[value]}"
                )
            seen[value] = route.table
    dead_letter = (
        string(body["dead_letter"], where / "dead_letter")
        if "dead_letter" in body
        else f"{name}_unrouted"
    )
    with located(where / "dead_letter"):
        validate_table_name(dead_letter)
    claimed = {n.lower() for t in tables.values() for n in (t.name, quarantine_table_name(t.name))}
    if dead_letter.lower() in claimed:
        raise (where / "dead_letter").error(
            f"{dead_letter} is a declared table or a quarantine table: a dead-letter table holds "
            "only the records no route takes"
        )
    return Routing(expression, tuple(routes), dead_letter)


def _file_source(source: Mapping[str, Any], base: Path, where: Where) -> FileSource:
    check_keys(source, _SOURCE_KEYS, where)
    require(source, ("format", "path"), where)
    reader_options = options(source.get("options", {}), where / "options")
    for option in reader_options:
        if option.lower() in _READER_OWNED:
            raise (where / "options" / option).error(
                f"{option!r} is set by the source itself"
                + (f" (use {key})" if (key := _OWNED_BY_KEY.get(option.lower())) else "")
            )
    path = location(base, string(source["path"], where / "path"), where / "path")
    archive_dir = source.get("archive_dir")
    with located(where):
        return FileSource(
            path=path,
            format=choice(source["format"], where / "format", get_args(FileFormat)),  # type: ignore[arg-type]
            options=reader_options,
            max_files_per_trigger=(
                integer(source["max_files_per_trigger"], where / "max_files_per_trigger", 1)
                if "max_files_per_trigger" in source
                else None
            ),
            clean_source=choice(  # type: ignore[arg-type]
                source.get("clean_source", "off"), where / "clean_source", get_args(CleanSource)
            ),
            archive_dir=(
                location(base, string(archive_dir, where / "archive_dir"), where / "archive_dir")
                if archive_dir is not None
                else None
            ),
        )


def _kafka_source(source: Mapping[str, Any], where: Where) -> KafkaSource:
    """A Kafka source; secret option values may be written as `${env:NAME}` (Kafka's provider)."""
    check_keys(source, _KAFKA_KEYS, where)
    require(source, ("bootstrap_servers",), where)

    def optional(key: str) -> str | None:
        return string(source[key], where / key) if key in source else None

    return KafkaSource(
        bootstrap_servers=string(source["bootstrap_servers"], where / "bootstrap_servers"),
        topic=optional("topic"),
        pattern=optional("pattern"),
        starting_offsets=string(
            source.get("starting_offsets", "earliest"), where / "starting_offsets"
        ),
        value_format=choice(  # type: ignore[arg-type]
            source.get("value_format", "json"), where / "value_format", get_args(ValueFormat)
        ),
        options=options(source.get("options", {}), where / "options"),
        max_offsets_per_trigger=(
            integer(source["max_offsets_per_trigger"], where / "max_offsets_per_trigger", 1)
            if "max_offsets_per_trigger" in source
            else None
        ),
    )
