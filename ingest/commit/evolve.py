"""A batch's new fields met as its table's `schema_evolution` says, before the batch is prepared.

The config's schema is the floor; under `add_columns` the table may have grown past it. Each
batch is first given the columns the table gained (parsed from each record's exact text: the
stream's reader was started with the schema of its start), then its new fields are found and:

- `rescue`: nothing here; they stay in `_lh_rescued` (or quarantine, or fail) as
  `unknown_fields` says;
- `add_columns`: they become nullable columns in one metadata commit with a ledger entry of kind
  `schema` for this batch, then the batch is parsed with them and lands in the next commit;
- `fail`: the batch stops with one line naming them (`NewFieldsError`), nothing committed;
- `freeze`: each row that brings one goes to quarantine with a reason naming them.

With `type_widening`, values a column's type cannot hold and a wider one can (`quality.widening`)
widen the column first, in a schema commit of the same kind, and the batch is parsed again with
the wider type; every later batch is parsed with the table's types.

Exactly once across an evolution: the schema commit changes no row and is idempotent (a column
already there is not added again), so a crash between it and the data commit re-runs the batch,
which finds the columns in the table and lands as it would have.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql.types import StructField, StructType

from ingest.sources.file_options import TEXT_OPTIONS
from quality.evolution import new_fields, with_added_columns, with_frozen_rows
from quality.records import RECORD_COLUMN, RESCUE_INPUT_COLUMN
from quality.widening import reparsed, widening_needs, with_types
from tables.delta.evolve import add_columns, table_types, widen_columns
from tables.delta.ledger import admin_metadata
from tables.errors import NewFieldsError
from tables.faults import fault_point
from tables.spec_rules import RESERVED_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ingest.commit.options import CommitOptions
    from tables.delta.writer import TableWriter


@dataclass(frozen=True)
class Evolved:
    """A batch with the columns its table has beyond the config's schema, and that schema."""

    batch: DataFrame
    schema: StructType
    added: tuple[str, ...] = ()
    """The columns this batch's own schema commit added."""
    persisted: DataFrame | None = None
    """The batch as persisted for the look for new fields (its source read once for the look and
    the commit): the caller unpersists it when the commit is done."""


def is_evolving(writer: TableWriter, batch: DataFrame) -> bool:
    """True if the table meets new fields other than by `unknown_fields`, or widens types, and
    the batch's records carry their text (JSON files and Kafka JSON values do)."""
    spec = writer.spec
    changes = spec.schema_evolution != "rescue" or spec.type_widening
    return changes and RECORD_COLUMN in batch.columns


def columns_beyond(spark: SparkSession, table: str, schema: StructType) -> StructType:
    """The table's data columns that `schema` lacks (added by an evolution), in table order."""
    known = {name.lower() for name in schema.fieldNames()}
    return StructType(
        [
            field
            for field in spark.table(table).schema.fields
            if field.name.lower() not in known and not field.name.startswith(RESERVED_PREFIX)
        ]
    )


def with_table_columns(
    writer: TableWriter, batch: DataFrame, schema: StructType, options: CommitOptions
) -> Evolved:
    """The batch with every column the table gained under `add_columns`, and the types its
    columns widened to under `type_widening`, parsed from its text.

    Before the skip decision: a re-sent batch is hashed with the columns it landed with.
    """
    spec = writer.spec
    if RECORD_COLUMN not in batch.columns:
        return Evolved(batch, schema)
    if spec.type_widening:
        held = table_types(writer.spark, spec.name, schema.fieldNames())
        kinds = {n: k for n, k in held.items() if k != schema[n].dataType}
        if kinds:
            schema = with_types(schema, kinds)
            batch = reparsed(batch, schema, spec.records, parse_options(options))
    if spec.schema_evolution != "add_columns":
        return Evolved(batch, schema)
    extra = columns_beyond(writer.spark, writer.spec.name, schema)
    return Evolved(with_added_columns(batch, extra), StructType([*schema.fields, *extra.fields]))


def evolve(writer: TableWriter, batch_id: int, current: Evolved, options: CommitOptions) -> Evolved:
    """Widen the types the batch's values need (`type_widening`), then meet its new fields as
    the table's `schema_evolution` says (module docstring)."""
    spec, batch, schema = writer.spec, current.batch, current.schema
    if not is_evolving(writer, batch) or RESCUE_INPUT_COLUMN not in batch.columns:
        return current
    if spec.schema_evolution == "freeze" and not spec.type_widening:
        return Evolved(with_frozen_rows(batch, schema), schema)
    # The looks for wider values and new fields are jobs over the batch: persisted, the source
    # is read once for them and for the commit's own preparation.
    batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        current = Evolved(batch, schema, persisted=batch)
        if spec.type_widening:
            current = _widened(writer, batch_id, current, options)
        if spec.schema_evolution == "freeze":
            return replace(current, batch=with_frozen_rows(current.batch, current.schema))
        if spec.schema_evolution == "rescue":
            return current
        return _evolved(writer, batch_id, current)
    except BaseException:
        batch.unpersist()
        raise


def _widened(
    writer: TableWriter, batch_id: int, current: Evolved, options: CommitOptions
) -> Evolved:
    """Widen the columns whose values the batch needs wider, in one schema commit, then parse
    the batch again with the table's types (another writer may have widened further)."""
    spec = writer.spec
    needs = widening_needs(current.batch, current.schema)
    if not needs:
        return current
    meta = admin_metadata(writer.app_id, batch_id, "schema", {})  # each commit names its column
    widened = widen_columns(writer.spark, spec.name, needs, meta, writer.clones)
    fault_point("after_schema_commit", batch_id)
    held = table_types(writer.spark, spec.name, list(needs))
    schema = with_types(current.schema, held)
    batch = reparsed(current.batch, schema, spec.records, parse_options(options))
    return replace(current, batch=batch, schema=schema, added=(*current.added, *widened))


def parse_options(options: CommitOptions) -> dict[str, str]:
    """The reader's options that parse a record (not those that find files or split lines)."""
    return {k: v for k, v in (options.reader_options or {}).items() if k not in TEXT_OPTIONS}


def _evolved(writer: TableWriter, batch_id: int, current: Evolved) -> Evolved:
    spec, batch, schema = writer.spec, current.batch, current.schema
    found = new_fields(batch, schema)
    if not found:
        return current
    if spec.schema_evolution == "fail":
        names = tuple(sorted(found))
        raise NewFieldsError(
            f"{spec.name}: batch {batch_id} of app id {writer.app_id!r} brings new field(s) "
            f"{', '.join(names)}, and the table's schema_evolution is fail: nothing of the batch "
            "was committed (add them to the schema, or choose add_columns, rescue or freeze)",
            table=spec.name,
            app_id=writer.app_id,
            batch_id=batch_id,
            fields=names,
        )
    fields = StructType([StructField(name, kind, True) for name, kind in found.items()])
    meta = admin_metadata(
        writer.app_id,
        batch_id,
        "schema",
        {"added_columns": {f.name: f.dataType.simpleString() for f in fields.fields}},
    )
    added = add_columns(writer.spark, spec.name, fields, meta, writer.clones)
    fault_point("after_schema_commit", batch_id)
    # Read back: a writer that raced this one may have added a column with another type.
    extra = columns_beyond(writer.spark, spec.name, schema)
    wanted = {name.lower() for name in found}
    new = StructType([f for f in extra.fields if f.name.lower() in wanted])
    return Evolved(
        with_added_columns(batch, new),
        StructType([*schema.fields, *new.fields]),
        (*current.added, *added),
        persisted=current.persisted,
    )
