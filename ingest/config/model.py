"""What a loaded config is: settings, tables by name, pipelines by name."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from ingest.routing import Routing
from ingest.sources import Source
from tables.engine.catalogs import CatalogSpec
from tables.engine.limits import QueryLimits
from tables.errors import ConfigError
from tables.identifiers import shorten, validate_pipeline_name, validate_table_name
from tables.spec import TableSpec

V = TypeVar("V")


class NameMap(Mapping[str, V]):
    """Declared names to specs, looked up as Spark does: case ignored.

    The loader refuses two names equal when case is ignored, so a lookup has one answer;
    `lakehouse vacuum EVENTS` finds table `events` and its replay window, as the catalog does.
    """

    def __init__(self, items: Mapping[str, V]) -> None:
        self._items = dict(items)
        self._folded = {name.lower(): name for name in self._items}

    def __getitem__(self, name: str) -> V:
        if name in self._items:
            return self._items[name]
        return self._items[self._folded[name.lower()]]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._folded

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class PipelineSpec:
    """A stream into a table (or routed into several) under one app id: where it reads, how
    often, where it checkpoints."""

    name: str
    table: str
    app_id: str
    source: Source
    trigger: str
    checkpoint: str
    #: The config file it was declared in (as errors name it), for errors found later.
    config_file: str | None = field(default=None, compare=False, repr=False)
    #: A routed pipeline's routes (`table` is then its first target), else None.
    routing: Routing | None = None

    @property
    def targets(self) -> tuple[str, ...]:
        """The tables the pipeline commits into: its routes' tables, or its one table."""
        return self.routing.tables if self.routing is not None else (self.table,)

    def writes(self, table: str) -> bool:
        """True if `table` is one of the pipeline's targets (case ignored, as Spark does)."""
        return table.lower() in {target.lower() for target in self.targets}


@dataclass(frozen=True)
class LakehouseConfig:
    """A whole config file: settings, tables by name, pipelines by name."""

    path: Path | None
    home: Path
    replay_window: timedelta
    tables: Mapping[str, TableSpec]
    pipelines: Mapping[str, PipelineSpec]
    catalog: CatalogSpec = field(default_factory=CatalogSpec)
    limits: QueryLimits = field(default_factory=QueryLimits)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", NameMap(self.tables))
        object.__setattr__(self, "pipelines", NameMap(self.pipelines))

    def table(self, name: str) -> TableSpec:
        """The spec of a declared table, or a ConfigError listing the declared ones."""
        validate_table_name(name)
        if name not in self.tables:
            raise ConfigError(
                f"table {shorten(name)} is not declared in {self._where()}{self._list(self.tables)}"
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
        validate_pipeline_name(name)
        if name not in self.pipelines:
            raise ConfigError(
                f"pipeline {shorten(name)} is not declared in {self._where()}"
                f"{self._list(self.pipelines)}"
            )
        return self.pipelines[name]

    def _where(self) -> str:
        return str(self.path) if self.path else "the configuration"

    @staticmethod
    def _list(names: Mapping[str, object]) -> str:
        return f" (declared: {', '.join(sorted(names))})" if names else " (none declared)"
