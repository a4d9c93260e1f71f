"""A spec's target table made to exist: created once, with the rescued column and a ledger view.

Above `table` (DDL), `ledger_view` and `warehouse`, which it ties together, so none of them
imports another to do it.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from tables.delta.ledger_view import create_ledger_view
from tables.delta.table import create_table, table_detail
from tables.delta.warehouse import is_warehouse_catalog, table_location, warehouse_dir
from tables.engine.object_store import assert_safe_log_store
from tables.spec import RESCUED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tables.spec import TableSpec


def ensure_table(spark: SparkSession, spec: TableSpec) -> bool:
    """Create the spec's target table if absent (idempotent); True if this call created it.

    On a shared metastore the table's ledger view is created with it, once; the warehouse
    catalog makes it in each session that registers the table (`tables.delta.warehouse`).
    On S3 a table is refused unless its commits go through a log store that many writers may
    share (`tables.engine.object_store.assert_safe_log_store`), checked before anything is
    written.
    """
    setting = partial(spark.conf.get, default=None)
    assert_safe_log_store(table_location(warehouse_dir(spark), spec.name), setting)
    created = create_table(
        spark,
        spec.name,
        spec.table_schema(spark),
        partition_by=spec.table_partitions,
        properties=spec.table_properties(),
        addable=(RESCUED_COLUMN,),
    )
    if not is_warehouse_catalog(spark):
        location = table_detail(spark, spec.name).location
        assert_safe_log_store(location, setting)
        if created:
            create_ledger_view(spark, spec.name, location, replace=False)
    return created
