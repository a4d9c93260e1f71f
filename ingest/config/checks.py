"""Checks across a whole config, and the checks of one pipeline just before it starts.

`check_config` runs at load time: names equal when case is ignored, app ids and checkpoints that
two pipelines share, locations that overlap in harmful ways. `assert_pipeline_ready` runs when a
pipeline is about to start (before Spark): the landing directory is there and is a directory,
the checkpoint is not a file, the trigger parses. It is separate because the other commands
(`status`, `check`, `replay`, ...) load the same file and must not fail on a landing directory
that only `ingest` needs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.config.where import Where, located
from ingest.triggers import parse_trigger
from tables.errors import ConfigError
from tables.identifiers import case_collisions, shorten
from tables.spec import QUARANTINE_SUFFIX, TOMBSTONES_SUFFIX

if TYPE_CHECKING:
    from ingest.config.model import LakehouseConfig, PipelineSpec

#: Table names the project itself uses (see quality/audit.py).
RESERVED_TABLES = frozenset({"lakehouse_quality"})
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):/.*", re.DOTALL)


def check_config(config: LakehouseConfig, root: Where) -> None:
    """Refuse what is wrong only in combination: shared names, app ids and locations."""
    _check_names(config, root)
    _check_app_ids(config, root)
    _check_locations(config, root)
    _check_table_columns(config, root)
    home = config.home
    if home.exists() and not home.is_dir():
        where = root / "lakehouse" / "home" if config.path is not None else Where("$LAKEHOUSE_HOME")
        raise where.error(f"lakehouse home {home} is a file, not a directory")


def _check_names(config: LakehouseConfig, root: Where) -> None:
    for section, names in (("tables", list(config.tables)), ("pipelines", list(config.pipelines))):
        for group in case_collisions(names):
            raise (root / section / group[1]).error(
                f"{shorten(group[1])} and {shorten(group[0])} are the same name when case is "
                "ignored (as Spark and case-insensitive file systems treat them)"
            )
    folded = {name.lower() for name in config.tables}
    for name in config.tables:
        last = name.rsplit(".", 1)[-1].lower()
        if last in RESERVED_TABLES:
            raise (root / "tables" / name).error(f"{name} is the name of the project's own table")
        for suffix, role in ((QUARANTINE_SUFFIX, "quarantine"), (TOMBSTONES_SUFFIX, "tombstone")):
            owner = name.lower().removesuffix(suffix)
            if name.lower().endswith(suffix) and owner in folded:
                raise (root / "tables" / name).error(f"{name} is the {role} table of table {owner}")


def _check_app_ids(config: LakehouseConfig, root: Where) -> None:
    upserted: dict[str, str] = {}
    for name, pipeline in config.pipelines.items():
        for table in pipeline.targets:
            if config.tables[table].merge != "upsert":
                continue
            other = upserted.setdefault(table.lower(), name)
            if other != name:
                raise _target_key(root / "pipelines" / name, pipeline, table).error(
                    f"pipelines.{other} already writes upsert table {table}: an upsert "
                    "table takes one writer at a time (its deletes and rows are two commits, so "
                    "two writers at once could bring back a key the other deleted)"
                )
    first: dict[str, str] = {}
    for name, pipeline in config.pipelines.items():
        other = first.setdefault(pipeline.app_id.lower(), name)
        if other != name:
            raise (root / "pipelines" / name / "app_id").error(
                f"app id {pipeline.app_id!r} is already used by pipelines.{other}: two streams "
                "under one app id would skip each other's batches as already committed"
            )


def _check_locations(config: LakehouseConfig, root: Where) -> None:
    home = os.path.normpath(config.home)
    owned = {
        "the lakehouse home": home,
        "the warehouse": _normal(config.catalog.warehouse or os.path.join(home, "warehouse")),
    }
    checkpoints: list[tuple[str, str]] = []
    for name, pipeline in config.pipelines.items():
        at = root / "pipelines" / name
        checkpoint = _normal(pipeline.checkpoint)
        if checkpoint == owned["the lakehouse home"]:
            raise (at / "checkpoint").error(f"{pipeline.checkpoint} is the lakehouse home itself")
        if _within(checkpoint, owned["the warehouse"]):
            raise (at / "checkpoint").error(
                f"{pipeline.checkpoint} is inside the warehouse ({owned['the warehouse']}): "
                "dropping or vacuuming a table would delete it"
            )
        for other, location in checkpoints:
            if _within(checkpoint, location) or _within(location, checkpoint):
                relation = "the same as" if checkpoint == location else "nested with"
                raise (at / "checkpoint").error(
                    f"{pipeline.checkpoint} is {relation} the checkpoint of pipelines.{other}"
                )
        checkpoints.append((name, checkpoint))
    _check_sources(config, root, owned["the warehouse"], checkpoints)


def _check_sources(
    config: LakehouseConfig, root: Where, warehouse: str, checkpoints: Iterable[tuple[str, str]]
) -> None:
    checkpoints = list(checkpoints)
    landed: dict[tuple[str, str], str] = {}
    for name, pipeline in config.pipelines.items():
        location = pipeline.source.location
        if location is None:
            continue
        at = root / "pipelines" / name / "source" / "path"
        landing = _normal(location)
        if _within(landing, warehouse):
            raise at.error(f"{location} is inside the warehouse ({warehouse})")
        for other, checkpoint in checkpoints:
            if _within(checkpoint, landing) or _within(landing, checkpoint):
                raise at.error(
                    f"{location} overlaps the checkpoint of pipelines.{other} "
                    f"({checkpoint}): the stream would read its own state as data"
                )
        for target in pipeline.targets:
            key = (target.lower(), landing)
            if key in landed and config.tables[target].dedup != "table":
                raise at.error(
                    f"pipelines.{landed[key]} already lands {location} into "
                    f"{target}: under two app ids every file would land twice"
                )
            landed.setdefault(key, name)


def _check_table_columns(config: LakehouseConfig, root: Where) -> None:
    """Each pipeline's table can hold what its source reads (a `raw` Kafka source needs exactly
    key and value)."""
    for name, pipeline in config.pipelines.items():
        raw_format = pipeline.source.raw_format
        if pipeline.routing is not None and raw_format == "parquet":
            raise (root / "pipelines" / name / "route_by").error(
                "routing needs records read per target (JSON or CSV files, Kafka values); "
                "Parquet files are read with one table's columns: give each table a pipeline"
            )
        for target in pipeline.targets:
            table = config.tables[target]
            with located(root / "pipelines" / name / "source"):
                pipeline.source.validate_table_columns(target, table.column_names)
            if table.schema_evolution != "rescue" and raw_format != "json":
                raise (root / "tables" / target / "schema_evolution").error(
                    f"schema_evolution = {table.schema_evolution!r} needs JSON records (JSON files "
                    f"or Kafka JSON values); pipelines.{name} reads {raw_format or 'raw'} "
                    "records: keep 'rescue' for it"
                )
            if table.type_widening and raw_format != "json":
                raise (root / "tables" / target / "type_widening").error(
                    f"type_widening needs JSON records (JSON files or Kafka JSON values); "
                    f"pipelines.{name} reads {raw_format or 'raw'} records"
                )


def _target_key(at: Where, pipeline: PipelineSpec, table: str) -> Where:
    """The config key that names `table` as a target of `pipeline` (`table`, or its route)."""
    return at / "routes" / table if pipeline.routing is not None else at / "table"


def assert_pipeline_ready(pipeline: PipelineSpec, trigger: str | None = None) -> None:
    """Refuse, before Spark starts, a pipeline whose local landing directory or checkpoint is
    unusable, or a trigger override that does not parse."""
    where = origin_of(pipeline)
    if trigger is not None:
        try:
            parse_trigger(trigger)
        except ConfigError as exc:
            raise ConfigError(f"--trigger: {exc.reason}") from exc
    location = pipeline.source.location
    if location is not None and _is_local(location):
        landing = Path(_local(location))
        if not landing.exists():
            raise (where / "source" / "path").error(f"landing directory {location} does not exist")
        if not landing.is_dir():
            raise (where / "source" / "path").error(
                f"landing directory {location} is a file, not a directory"
            )
    if _is_local(pipeline.checkpoint):
        checkpoint = Path(_local(pipeline.checkpoint))
        if checkpoint.exists() and not checkpoint.is_dir():
            raise (where / "checkpoint").error(
                f"checkpoint {pipeline.checkpoint} is a file, not a directory"
            )


def origin_of(pipeline: PipelineSpec) -> Where:
    """The pipeline's place in its file, or its name when it was built in code."""
    if pipeline.config_file is not None:
        return Where(pipeline.config_file, ("pipelines", pipeline.name))
    return Where(f"pipeline {pipeline.name}")


def _is_local(location: str) -> bool:
    match = _URI.fullmatch(location)
    return match is None or match.group(1).lower() == "file"


def _local(location: str) -> str:
    return location.removeprefix("file://").removeprefix("file:")


def _normal(location: str) -> str:
    """A location for comparison: local paths normalised, URIs without a trailing slash."""
    if _is_local(location):
        return os.path.normpath(_local(location))
    return location.rstrip("/")


def _within(inner: str, outer: str) -> bool:
    """True if `inner` is `outer` or lies below it."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")
