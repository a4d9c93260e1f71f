"""Where a value sits in a config file, and readers that refuse a value of the wrong TOML type.

Every config error names the file and the key path, `lakehouse.toml: tables.events.dedup_window:
invalid interval 'soon' (expected e.g. '7 days')`. A `Where` carries that path down the parse
(`where / "tables" / name`), so no message is built by hand. Errors raised by the objects a
config is made of (TableSpec, FileSource, parse_interval, ...) name at most their own key; the
`located` context restates them with the file and the full path.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tables.errors import ConfigError, ConfigFileError, KeyPath
from tables.identifiers import case_collisions, key_path, shorten, validate_option_name
from tables.spec_rules import parse_interval

#: Scalar TOML values a reader option or table property may hold; each becomes a string.
OptionValue = str | int | float | bool


@dataclass(frozen=True)
class Where:
    """A file and a key path inside it; `where / key` goes one level down."""

    file: str
    keys: KeyPath = ()

    @classmethod
    def of(cls, path: Path | None) -> Where:
        """The root of a config file (or of an in-memory config when `path` is None)."""
        if path is None:
            return cls("config")
        text = str(path)
        return cls(text if text.isprintable() and len(text) <= 200 else shorten(text, 200))

    def __truediv__(self, key: str | int) -> Where:
        return Where(self.file, (*self.keys, key))

    def at(self, keys: KeyPath | None) -> Where:
        """This place extended by a relative key path (as a ConfigError carries it)."""
        return Where(self.file, (*self.keys, *(keys or ())))

    def __str__(self) -> str:
        return f"{self.file}: {key_path(self.keys)}" if self.keys else self.file

    def error(self, reason: str) -> ConfigFileError:
        """A ConfigFileError naming this place."""
        return ConfigFileError(f"{self}: {reason}", key=self.keys, reason=reason)

    def restate(self, exc: ConfigError) -> ConfigFileError:
        """An error of a part of the config, restated with the file and the full key path."""
        if isinstance(exc, ConfigFileError):
            return exc
        return self.at(exc.key).error(exc.reason)


@contextmanager
def located(where: Where) -> Iterator[None]:
    """Restate any ConfigError raised inside with the file and key path of `where`."""
    try:
        yield
    except ConfigFileError:
        raise
    except ConfigError as exc:
        raise where.restate(exc) from exc


def toml_type(value: object) -> str:
    """The TOML name of a parsed value's type, for messages."""
    kinds: list[tuple[type | tuple[type, ...], str]] = [
        (bool, "boolean"),
        (int, "integer"),
        (float, "float"),
        (str, "string"),
        (Mapping, "table"),
        (list, "array"),
        (datetime.datetime, "date-time"),
        (datetime.date, "date"),
        (datetime.time, "time"),
    ]
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def mapping(value: Any, where: Where) -> Mapping[str, Any]:
    """A TOML table."""
    if not isinstance(value, Mapping):
        raise where.error(f"expected a table, got {toml_type(value)}")
    return value


def string(value: Any, where: Where) -> str:
    """A non-blank TOML string."""
    if not isinstance(value, str):
        raise where.error(f"expected a string, got {toml_type(value)} {shorten(value)}")
    if not value.strip():
        raise where.error(f"expected a non-empty string, got {shorten(value)}")
    return value


def strings(value: Any, where: Where) -> tuple[str, ...]:
    """An array of strings; one string stands for an array of one."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise where.error(f"expected an array of strings, got {toml_type(value)}")
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise (where / index).error(f"expected a string, got {toml_type(item)}")
    return tuple(items)


def flag(value: Any, where: Where) -> bool:
    """A true/false key (TOML booleans only: `"true"` is refused, not read as text)."""
    if not isinstance(value, bool):
        raise where.error(f"expected true or false, got {value!r}")
    return value


def integer(value: Any, where: Where, minimum: int) -> int:
    """A TOML integer of at least `minimum` (a boolean is not an integer here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(f"expected an integer, got {toml_type(value)} {shorten(value)}")
    if value < minimum:
        raise where.error(f"must be at least {minimum}, got {value}")
    return value


def interval(value: Any, where: Where) -> datetime.timedelta:
    """A positive interval such as `"7 days"`."""
    with located(where):
        return parse_interval(string(value, where), positive=True)


def choice(value: Any, where: Where, allowed: tuple[str, ...]) -> str:
    """One of `allowed`."""
    text = string(value, where)
    if text not in allowed:
        raise where.error(f"must be one of {allowed}, got {shorten(text)}")
    return text


def options(value: Any, where: Where) -> dict[str, str]:
    """Reader options or table properties: plain names, scalar values, rendered as strings.

    Spark matches option names case-insensitively and keeps one of two spellings silently, so
    `header` and `Header` together are refused. A table or an array as a value is refused: it
    used to become its Python text. Booleans become `true`/`false`, as Spark writes them.
    """
    body = mapping(value, where)
    rendered: dict[str, str] = {}
    for name, item in body.items():
        with located(where / name):
            validate_option_name(name)
        if isinstance(item, Mapping | list):
            raise (where / name).error(
                f"expected a string, number or boolean, got {toml_type(item)} (nested values "
                "are not passed to Spark; quote the value if it is meant as text)"
            )
        if not isinstance(item, OptionValue):
            raise (where / name).error(
                f"expected a string, number or boolean, got {toml_type(item)}"
            )
        rendered[name] = str(item).lower() if isinstance(item, bool) else str(item)
    for group in case_collisions(rendered):
        raise (where / group[-1]).error(
            f"set twice when case is ignored: {', '.join(map(shorten, group))}"
        )
    return rendered


def check_keys(body: Mapping[str, Any], allowed: frozenset[str], where: Where) -> None:
    """Refuse keys outside `allowed`, naming them and the allowed ones."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        names = ", ".join(shorten(k) for k in unknown[:5])
        raise (where / unknown[0]).error(
            f"unknown key(s) {names}; allowed: {', '.join(sorted(allowed))}"
        )


def require(body: Mapping[str, Any], keys: tuple[str, ...], where: Where) -> None:
    """Refuse a body that lacks one of `keys`."""
    for key in keys:
        if key not in body:
            raise (where / key).error(f"missing required key {key!r}")


#: A URI (`s3a://`, `abfss://`, `dbfs:/`, `file:/`) rather than a path.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/.*", re.DOTALL)


def location(base: Path, value: str, where: Where) -> str:
    """An absolute location: URIs (s3://, abfss://, dbfs:/) as given, paths against `base`."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise where.error(f"location {shorten(value)} holds control characters")
    if _URI.fullmatch(value):
        return value
    try:
        candidate = Path(value).expanduser()
        return str((candidate if candidate.is_absolute() else base / candidate).resolve())
    except (RuntimeError, OSError) as exc:
        raise where.error(f"cannot resolve {shorten(value)}: {exc}") from exc


def local_path(base: Path, value: str, where: Where) -> str:
    """A local directory (the lakehouse home): a path, not a URI."""
    if _URI.fullmatch(value) and not value.startswith("file:"):
        raise where.error(
            f"{shorten(value)} is a URI; the lakehouse home is a local directory (its logs, GX "
            'project and temporary files): put the tables on S3 with warehouse = "s3a://..." '
            "and the checkpoints with each pipeline's checkpoint"
        )
    return location(base, value.removeprefix("file:"), where)
