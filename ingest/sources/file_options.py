"""Reader options of a landing directory: the ones the exact readers honour, named as Spark does.

JSON and CSV files are not read by Spark's JSON and CSV readers but as text and parsed by the
quality layer (`quality.records`, `quality.csv_records`), so most of those readers' options
(`nullValue`, `encoding`, `allowSingleQuotes`, `ignoreCorruptFiles`, ...) would be accepted and
silently do nothing, or worse, change what is read without a trace. An option is therefore
accepted only when something honours it, and refused with the list of those that are. Spark
matches option names with case ignored, so `Header` is `header`: names are brought to the
spelling the readers look up. Parquet is read by Spark's own reader, which honours its options:
they pass as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tables.errors import ConfigError
from tables.identifiers import shorten

#: Options of Spark's text reader, which reads JSON lines and whole CSV files.
TEXT_OPTIONS = (
    "lineSep",
    "pathGlobFilter",
    "recursiveFileLookup",
    "modifiedBefore",
    "modifiedAfter",
)
#: Options of `from_json` that apply to the parse of each JSON line (docs/records.md).
JSON_PARSE_OPTIONS = (
    "timestampFormat",
    "timestampNTZFormat",
    "dateFormat",
    "timeZone",
    "locale",
    "enableDateTimeParsingFallback",
)
#: Options the CSV split honours (`quality.csv_records`); `lineSep` is not among them: records
#: end at CR, LF or CRLF outside quotes.
CSV_OPTIONS = ("header", "sep", "delimiter", "quote", "escape", *TEXT_OPTIONS[1:])
SUPPORTED: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "json": (*TEXT_OPTIONS, *JSON_PARSE_OPTIONS, "multiLine"),
        "csv": (*CSV_OPTIONS, "multiLine"),
    }
)
#: Options accepted with one value only: the one the reader behaves by anyway.
_ONLY_VALUE: Mapping[tuple[str, str], tuple[str, str]] = MappingProxyType(
    {
        ("json", "multiLine"): (
            "false",
            "JSON sources are read one record per line (JSON Lines): multiLine is refused",
        ),
        ("csv", "multiLine"): (
            "true",
            "CSV records always end at a line break outside quotes (a quoted field may hold one), "
            "as with multiLine = true",
        ),
    }
)


def reader_options(file_format: str, options: Mapping[str, str]) -> dict[str, str]:
    """The options under the names the readers look up; ConfigError for one nothing honours."""
    supported = SUPPORTED.get(file_format)
    if supported is None:
        return dict(options)
    spelled = {name.lower(): name for name in supported}
    named: dict[str, str] = {}
    for name, value in options.items():
        canonical = spelled.get(name.lower())
        if canonical is None:
            raise ConfigError(
                f"option {shorten(name)} is not honoured by the exact {file_format.upper()} "
                f"reader (it would be ignored); supported: {', '.join(supported)}",
                key=("options", name),
            )
        only = _ONLY_VALUE.get((file_format, canonical))
        if only is not None and str(value).lower() != only[0]:
            raise ConfigError(only[1], key=("options", name))
        refused = _refused_value(file_format, canonical, str(value))
        if refused is not None:
            raise ConfigError(refused, key=("options", name))
        named[canonical] = value
    return named


def _refused_value(file_format: str, name: str, value: str) -> str | None:
    """Why the CSV split cannot honour `value` for option `name` as Spark would, or None.

    An empty `quote` or `escape` turns it off (as in Spark, which reads "" as NUL); more than
    one character is an error in Spark and would never match in the split; an empty separator
    is an error in Spark; `header` is a boolean.
    """
    if file_format != "csv":
        return None
    if name in ("quote", "escape") and len(value) > 1:
        what = "quoting" if name == "quote" else "escaping"
        return f"{name} must be one character, or empty to turn {what} off; got {shorten(value)}"
    if name in ("sep", "delimiter") and not value:
        return f"{name} must not be empty"
    if name == "header" and value.lower() not in ("true", "false"):
        return f"header must be true or false, got {shorten(value)}"
    return None
