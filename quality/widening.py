"""Type widening (`type_widening = true`): values a column's type cannot hold and a wider one can.

Delta widens a column's type in place where every old value converts exactly (its table feature
`typeWidening`): TINYINT to SMALLINT to INT to BIGINT, FLOAT to DOUBLE, DECIMAL(p, s) to a larger
precision with the same scale. A JSON record whose value overflows its column (`2147483648` for
an INT, `1e39` for a FLOAT, `123456.5` for a DECIMAL(6, 1)) is otherwise quarantined as `wrong
type` (a FLOAT's overflow as `out of range`); with widening on, the batch's records are looked at
once (one Spark job, over the rows the parser refused and the FLOAT columns' values), the
narrowest type that holds every such value is chosen, and the ingest layer widens the column
(`ingest.commit.evolve`) before the batch is parsed again with it. A value no widening can hold
(a 20-digit integer, text in a number column) is still quarantined with its reason.

The values are read with `get_json_object`, Spark's streaming JSON reader: linear on any record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    LongType,
    StructField,
    StructType,
)

from quality.records import (
    CORRUPT_COLUMN,
    FAULT_COLUMN,
    MAGIC_COLUMN,
    RECORD_COLUMN,
    RESCUE_INPUT_COLUMN,
    json_records,
)
from tables.delta.evolve import INTEGER_LADDER
from tables.record_rules import RecordRules

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_MAX_PRECISION = 38
_READER_COLUMNS = (CORRUPT_COLUMN, RECORD_COLUMN, FAULT_COLUMN, RESCUE_INPUT_COLUMN, MAGIC_COLUMN)


def is_widenable(kind: DataType) -> bool:
    """True for a type Delta can widen in place to hold larger values (module docstring)."""
    return isinstance(kind, FloatType | DecimalType) or (
        kind in INTEGER_LADDER and kind != LongType()
    )


def wider(kind: DataType, need: int) -> DataType:
    """The type `kind` widens to for a need read by `widening_needs`: an integer ladder rung, 1
    (DOUBLE) for a FLOAT, a digit count before the point for a DECIMAL; `kind` if it holds it."""
    if isinstance(kind, DecimalType):
        precision = min(_MAX_PRECISION, max(kind.precision, kind.scale + need))
        return DecimalType(precision, kind.scale)
    if isinstance(kind, FloatType):
        return DoubleType() if need else kind
    rung = max(INTEGER_LADDER.index(kind), need)
    return INTEGER_LADDER[rung]


def widening_needs(batch: DataFrame, schema: StructType) -> dict[str, DataType]:
    """The columns of `schema` the batch's records need wider, with the type each widens to.

    One job. An integer column needs the lowest rung whose cast of a refused record's value
    succeeds; a FLOAT column DOUBLE if a value is infinite as a FLOAT and finite as a DOUBLE; a
    DECIMAL the digits before the point of its largest value that fits DECIMAL(38, s).
    """
    columns = [f for f in schema.fields if is_widenable(f.dataType)]
    if not columns or RECORD_COLUMN not in batch.columns:
        return {}
    refused = F.col(CORRUPT_COLUMN).isNotNull() & F.col(FAULT_COLUMN).isNull()
    line = F.col(RECORD_COLUMN)
    probes = [
        _need(f, F.get_json_object(line, f"$.{f.name}"), refused).alias(f.name) for f in columns
    ]
    row = batch.agg(*probes).collect()[0]
    needs = {f.name: wider(f.dataType, int(row[f.name] or 0)) for f in columns}
    return {name: kind for name, kind in needs.items() if kind != schema[name].dataType}


def _need(column: StructField, token: Column, refused: Column) -> Column:
    kind = column.dataType
    if isinstance(kind, FloatType):
        narrow, wide = token.try_cast(kind), token.try_cast(DoubleType())
        overflow = F.isnan(narrow) | (F.abs(narrow) == F.lit(float("inf")))
        finite = ~F.isnan(wide) & (F.abs(wide) != F.lit(float("inf")))
        return F.max((overflow & finite).cast("int"))
    if isinstance(kind, DecimalType):
        fits = token.try_cast(DecimalType(_MAX_PRECISION, kind.scale))
        whole = F.abs(fits).cast(DecimalType(_MAX_PRECISION, 0)).cast("string")
        return F.max(F.when(refused & kind_fails(token, kind), F.length(whole)))
    rungs = F.lit(None).cast("int")
    for index in reversed(range(INTEGER_LADDER.index(kind) + 1, len(INTEGER_LADDER))):
        fits = token.try_cast(INTEGER_LADDER[index]).isNotNull()
        rungs = F.when(fits, F.lit(index)).otherwise(rungs)
    return F.max(F.when(refused & kind_fails(token, kind), rungs))


def kind_fails(token: Column, kind: DataType) -> Column:
    """True where a value is present and does not convert to `kind`."""
    return token.isNotNull() & token.try_cast(kind).isNull()


def reparsed(
    batch: DataFrame, schema: StructType, rules: RecordRules, options: Mapping[str, str]
) -> DataFrame:
    """The batch's records parsed again, with `schema` (widened types), as its reader did.

    A row the reader already faulted (too large, not UTF-8, ...) keeps its fault and its columns
    cast; the others are read again from their exact text (`_lh_record`), with the reader's
    options and the table's record rules, so every reason comes out as the first read's did.
    """
    passthrough = [c for c in batch.columns if c not in {*schema.fieldNames(), *_READER_COLUMNS}]
    faulted = batch.where(F.col(FAULT_COLUMN).isNotNull()).select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields],
        *[c for c in batch.columns if c not in schema.fieldNames()],
    )
    sound = batch.where(F.col(FAULT_COLUMN).isNull())
    again = json_records(
        sound,
        F.col(RECORD_COLUMN),
        schema,
        [F.col(c) for c in passthrough],
        detect_files=MAGIC_COLUMN in batch.columns,
        parse_options=options,
        rules=rules,
    )
    return again.unionByName(faulted).select(*batch.columns)


def with_types(schema: StructType, kinds: Mapping[str, DataType]) -> StructType:
    """`schema` with the named columns' types replaced."""
    return StructType(
        [
            StructField(f.name, kinds.get(f.name, f.dataType), f.nullable, f.metadata)
            for f in schema.fields
        ]
    )
