"""Stream triggers: `available-now` for scheduled jobs, or a processing-time interval."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tables.errors import ConfigError
from tables.identifiers import shorten

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

AVAILABLE_NOW = "available-now"
#: ASCII only: `\d` would take other scripts' digits (U+0663 ARABIC-INDIC DIGIT THREE) and re.I
#: the long s (U+017F) or the Kelvin sign as letters of the unit.
_INTERVAL = re.compile(
    r"^(?:every\s+)?([0-9]+)\s*(millisecond|second|minute|hour)s?$", re.I | re.ASCII
)


def parse_trigger(text: str) -> dict[str, Any]:
    """Translate a trigger name into `DataStreamWriter.trigger` keyword arguments.

    `available-now` processes what has landed, in as many batches as the source limits allow,
    then stops: the mode for scheduled jobs. `30 seconds` (or `every 5 minutes`) runs until
    stopped, starting a batch at each interval (`500 milliseconds` for a landing zone that
    should be picked up at once: each interval with nothing new costs a listing, no batch).
    """
    cleaned = text.strip().lower()
    if cleaned in (AVAILABLE_NOW, "availablenow", "available_now"):
        return {"availableNow": True}
    match = _INTERVAL.match(cleaned)
    if match and int(match.group(1)) > 0:
        return {"processingTime": f"{int(match.group(1))} {match.group(2)}s"}
    raise ConfigError(
        f"invalid trigger {shorten(text)}: use 'available-now' or an interval such as '30 seconds'"
    )


def is_available_now(text: str) -> bool:
    """Return True if the trigger stops by itself once the landed data is processed."""
    return parse_trigger(text) == {"availableNow": True}


def start_query(
    stream: DataFrame,
    app_id: str,
    checkpoint: str,
    trigger_args: Mapping[str, Any],
    handler: Callable[[DataFrame, int], None],
) -> StreamingQuery:
    """Start a pipeline's `foreachBatch` query, named after its app id, on its checkpoint."""
    name = f"lakehouse_{app_id}".replace("-", "_").replace(".", "_")
    return (
        stream.writeStream.queryName(name)
        .foreachBatch(handler)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger_args)
        .start()
    )
