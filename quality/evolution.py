"""New top-level fields in a batch's JSON records: found, typed, and filled into added columns.

A table's `schema_evolution` says what a field that no column holds does to its batch
(docs/configuration.md#schema-evolution). This module holds the parts that look at the records:
which new fields a batch brings and the JSON kinds of their values (one Spark job over the rows
the reader already flagged for the rescue, so a batch without unknown keys costs nothing more),
the column type those kinds give, the values of added columns parsed from each record's exact
text, and the reason a frozen table's row is quarantined. Committing the new columns is the
ingest layer's (`ingest.commit.evolve`).

The type a new field gets follows Spark's JSON inference (Auto Loader's with
`cloudFiles.inferColumnTypes`): integers BIGINT, other numbers DOUBLE, true/false BOOLEAN,
anything else (strings, objects, arrays, mixed kinds, integers of more than 18 digits) STRING.
A value parsed into an added column that does not convert to its type is a fault naming the
column, never a silent NULL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    STRICT_JSON,
)
from quality.rescue import top_level_members
from tables.identifiers import is_column_name
from tables.spec_rules import RESERVED_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Kind = Literal["string", "integer", "number", "boolean", "null", "json"]
#: Digits an integer may have and still be a BIGINT whatever they are (19 may overflow).
_BIGINT_DIGITS = 18
_INTEGER = re.compile(r"-?[0-9]+")
_ADDED = "_lh_added"
_NEW = "_lh_new"


def value_kind(value: str) -> Kind:
    """The JSON kind of one value's text as delivered (`quality.rescue.top_level_members`)."""
    first = value[:1]
    if first == '"':
        return "string"
    if first in ("{", "["):
        return "json"
    if value in ("true", "false"):
        return "boolean"
    if value == "null":
        return "null"
    if _INTEGER.fullmatch(value):
        return "integer" if len(value.lstrip("-")) <= _BIGINT_DIGITS else "json"
    return "number"


def column_type(kinds: Iterable[str]) -> DataType:
    """The type of a new column whose values in the batch had these kinds."""
    seen = set(kinds) - {"null"}
    if seen == {"integer"}:
        return LongType()
    if seen and seen <= {"integer", "number"}:
        return DoubleType()
    if seen == {"boolean"}:
        return BooleanType()
    return StringType()


def is_addable(name: str, known: frozenset[str]) -> bool:
    """True if a field may become a column: a plain name, not reserved, and no column of the
    `known` (lower-cased names) in any case (a case variant stays rescued, as `unknown_fields`
    says)."""
    lowered = name.lower()
    return is_column_name(name) and not lowered.startswith(RESERVED_PREFIX) and lowered not in known


def new_field_kinds(text: str | None, known: Sequence[str]) -> dict[str, str] | None:
    """Each addable top-level field of one record's text, with its value's kind (a UDF body).

    Linear in the record's length and stack-safe (`top_level_members`); None for a record that
    is not a JSON object (the reader quarantines it).
    """
    if text is None:
        return None
    members = top_level_members(text)
    if members is None:
        return None
    lowered = frozenset(k.lower() for k in known)
    return {name: value_kind(value) for name, value in members if is_addable(name, lowered)}


def new_fields(batch: DataFrame, schema: StructType) -> dict[str, DataType]:
    """The fields of the batch's records that no column of `schema` holds, with their types.

    Looks only at the rows the reader flagged for the rescue (`_lh_rescue_input`) that parsed.
    Of two new names that differ only in case, the first in sorted order is taken; the other
    stays rescued as its case variant.
    """
    if RESCUE_INPUT_COLUMN not in batch.columns:
        return {}
    known = tuple(schema.fieldNames())
    kinds = F.udf(lambda text: new_field_kinds(text, known), "map<string,string>")
    flagged = batch.filter(F.col(RESCUE_INPUT_COLUMN).isNotNull() & F.col(CORRUPT_COLUMN).isNull())
    found = (
        flagged.select(F.explode(kinds(F.col(RESCUE_INPUT_COLUMN))).alias("name", "kind"))
        .groupBy("name")
        .agg(F.collect_set("kind").alias("kinds"))
        .collect()
    )
    chosen: dict[str, DataType] = {}
    spellings: set[str] = set()
    for row in sorted(found, key=lambda r: str(r["name"])):
        name = str(row["name"])
        if name.lower() not in spellings:
            spellings.add(name.lower())
            chosen[name] = column_type(row["kinds"])
    return chosen


def with_added_columns(batch: DataFrame, added: StructType) -> DataFrame:
    """The batch with `added` (columns the reader's schema lacks) parsed from each record's text.

    A record that did not parse keeps NULLs there (it is quarantined whole). A value present and
    not null that does not convert to its column's type sets the row's fault, naming the column.
    """
    if not added.fields:
        return batch
    line = F.regexp_replace(F.col(RECORD_COLUMN), "^\\x{FEFF}", "")
    parse = StructType([*added.fields, StructField(_NEW, StringType(), True)])
    options = {**STRICT_JSON, "columnNameOfCorruptRecord": _NEW}
    usable = F.col(CORRUPT_COLUMN).isNull() & F.col(FAULT_COLUMN).isNull()
    staged = batch.withColumn(_ADDED, F.when(usable, F.from_json(line, parse, options)))
    keys = F.json_object_keys(line)
    fault: Column = F.col(FAULT_COLUMN)
    for column in added.fields:
        present = (
            F.array_contains(keys, column.name)
            & F.get_json_object(line, f"$.{column.name}").isNotNull()
        )
        missed = usable & present & F.col(f"{_ADDED}.{column.name}").isNull()
        reason = (
            f"field {column.name} does not convert to {column.dataType.simpleString()}, the type "
            "of the column schema_evolution added for it"
        )
        fault = F.when(fault.isNull() & missed, F.lit(reason)).otherwise(fault)
    columns = [F.col(c) for c in batch.columns if c != FAULT_COLUMN]
    return staged.select(
        *columns,
        *[F.col(f"{_ADDED}.{c.name}").alias(c.name) for c in added.fields],
        fault.alias(FAULT_COLUMN),
    )


def with_frozen_rows(batch: DataFrame, schema: StructType) -> DataFrame:
    """Set the fault of each parsed row that brings a field no column holds (`freeze`)."""
    if RESCUE_INPUT_COLUMN not in batch.columns:
        return batch
    known = tuple(schema.fieldNames())
    kinds = F.udf(lambda text: new_field_kinds(text, known), "map<string,string>")
    names = F.array_sort(F.map_keys(kinds(F.col(RESCUE_INPUT_COLUMN))))
    frozen = F.col(RESCUE_INPUT_COLUMN).isNotNull() & (F.size(names) > 0)
    reason = F.concat(
        F.lit("new field(s) "),
        F.array_join(names, ", "),
        F.lit(": the table's schema_evolution is freeze"),
    )
    fault = F.coalesce(F.col(FAULT_COLUMN), F.when(frozen, reason)).alias(FAULT_COLUMN)
    return batch.select(*[fault if c == FAULT_COLUMN else F.col(c) for c in batch.columns])
