"""Where a config's tables live: `[lakehouse.catalog]`, `warehouse` and `[lakehouse.storage]`.

The three make one `CatalogSpec`: how table names map to locations (the warehouse directory or a
Hive metastore), where new tables go (`<home>/warehouse` unless `warehouse` says otherwise, such
as `s3a://bucket/tables`), and how an `s3a://` location is reached (`tables.engine.object_store`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from ingest.config.where import (
    Where,
    check_keys,
    choice,
    flag,
    integer,
    interval,
    located,
    location,
    mapping,
    string,
)
from tables.engine.catalogs import CatalogKind, CatalogSpec
from tables.engine.limits import QueryLimits
from tables.engine.object_store import Credentials, LogStoreKind, StorageSpec

CATALOG_KEYS = frozenset({"kind", "url", "user", "password_env"})
QUERIES_KEYS = frozenset({"timeout", "max_rows"})
STORAGE_KEYS = frozenset(
    {"endpoint", "region", "path_style", "credentials", "profile", "log_store"}
)


def catalog_of(settings: Mapping[str, Any], warehouse: str | None, where: Where) -> CatalogSpec:
    """The `CatalogSpec` of `[lakehouse]`'s `catalog` and `storage` tables and `warehouse`."""
    body = mapping(settings.get("catalog", {}), where / "catalog")
    check_keys(body, CATALOG_KEYS, where / "catalog")
    storage = _storage(settings["storage"], where / "storage") if "storage" in settings else None

    def optional(key: str) -> str | None:
        return string(body[key], where / "catalog" / key) if key in body else None

    at = where / ("warehouse" if warehouse is not None and storage is None else "catalog")
    with located(at):
        return CatalogSpec(
            kind=choice(  # type: ignore[arg-type]
                body.get("kind", "warehouse"), where / "catalog" / "kind", get_args(CatalogKind)
            ),
            url=optional("url"),
            user=optional("user"),
            password_env=optional("password_env"),
            warehouse=warehouse,
            storage=storage,
        )


def _storage(value: Any, where: Where) -> StorageSpec:
    """`[lakehouse.storage]`: the S3 endpoint, region, addressing and credentials' source."""
    body = mapping(value, where)
    check_keys(body, STORAGE_KEYS, where)

    def optional(key: str) -> str | None:
        return string(body[key], where / key) if key in body else None

    path_style = flag(body.get("path_style", False), where / "path_style")
    with located(where):
        return StorageSpec(
            endpoint=optional("endpoint"),
            region=optional("region"),
            path_style=path_style,
            credentials=choice(  # type: ignore[arg-type]
                body.get("credentials", "environment"),
                where / "credentials",
                get_args(Credentials),
            ),
            profile=optional("profile"),
            log_store=choice(  # type: ignore[arg-type]
                body.get("log_store", "conditional"), where / "log_store", get_args(LogStoreKind)
            ),
        )


def warehouse_of(settings: Mapping[str, Any], base: Path, where: Where) -> str | None:
    """`warehouse`: a location (a path against the config's folder, or a URI), or None."""
    if "warehouse" not in settings:
        return None
    return location(base, string(settings["warehouse"], where / "warehouse"), where / "warehouse")


def limits_of(settings: Mapping[str, Any], where: Where) -> QueryLimits:
    """`[lakehouse.queries]`: an analyst's statement timeout and the most rows `sql` prints."""
    body = mapping(settings.get("queries", {}), where / "queries")
    check_keys(body, QUERIES_KEYS, where / "queries")
    defaults = QueryLimits()
    timeout = (
        interval(body["timeout"], where / "queries" / "timeout").total_seconds()
        if "timeout" in body
        else defaults.timeout_seconds
    )
    rows = (
        integer(body["max_rows"], where / "queries" / "max_rows", 1)
        if "max_rows" in body
        else defaults.max_rows
    )
    with located(where / "queries"):
        return QueryLimits(timeout, rows)
