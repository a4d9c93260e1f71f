"""The embedded catalog: tables found in the warehouse directory and registered by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.delta.table import create_table, table_exists
from tables.delta.warehouse import (
    candidate_tables,
    has_commit,
    is_warehouse_catalog,
    local_path,
    register_all,
    table_location,
    warehouse_dir,
)
from tables.delta.writer import TableWriter
from tables.engine.catalogs import CatalogSpec
from tables.errors import ConfigError
from tables.spec import parse_struct


def test_table_location_follows_spark_managed_layout() -> None:
    assert table_location("/w", "events") == "/w/events"
    assert table_location("/w", "Events") == "/w/events"
    assert table_location("/w", "default.events") == "/w/events"
    assert table_location("file:/w", "sales.orders") == "file:/w/sales.db/orders"


def test_local_path_of_uris() -> None:
    assert local_path("file:/tmp/w%20x") == Path("/tmp/w x")
    assert local_path("/tmp/w") == Path("/tmp/w")
    assert local_path("s3a://bucket/w") is None


def test_candidate_tables_lists_directories_with_a_delta_log(tmp_path: Path) -> None:
    for relative in (
        "events/_delta_log",
        "sales.db/orders/_delta_log",
        "junk",
        "bad name/_delta_log",
    ):
        (tmp_path / relative).mkdir(parents=True)
    (tmp_path / "sales.db" / "notes").mkdir()
    assert candidate_tables(tmp_path) == ["events", "sales.orders"]
    assert candidate_tables(tmp_path / "missing") == []


def test_catalog_spec_checks_and_settings(tmp_path: Path) -> None:
    assert CatalogSpec().session_conf(tmp_path)["spark.sql.catalogImplementation"] == "in-memory"
    hive = CatalogSpec("hive", "jdbc:postgresql://127.0.0.1:5432/meta", "hive", "PGPASS")
    conf = hive.session_conf(tmp_path, {"PGPASS": "s3cret"})
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] == "s3cret"
    with pytest.raises(ConfigError, match="PGPASS is not set"):
        hive.session_conf(tmp_path, {})
    with pytest.raises(ConfigError, match="needs url"):
        CatalogSpec("hive")
    with pytest.raises(ConfigError, match="postgresql"):
        CatalogSpec("hive", "jdbc:mysql://h/db")
    with pytest.raises(ConfigError, match="apply to kind = 'hive' only"):
        CatalogSpec("warehouse", url="jdbc:postgresql://h/db")


def test_a_long_refused_metastore_url_or_kind_is_shortened() -> None:
    with pytest.raises(ConfigError) as info:
        CatalogSpec("hive", "jdbc:mysql://" + "h" * 10_000)
    assert len(str(info.value)) < 250
    assert "(10013 characters)" in str(info.value)
    with pytest.raises(ConfigError) as info:
        CatalogSpec("k" * 10_000)  # type: ignore[arg-type]
    assert "(10000 characters)" in str(info.value)


def test_a_table_another_process_created_is_found_by_name(spark: SparkSession) -> None:
    assert is_warehouse_catalog(spark)
    location = table_location(warehouse_dir(spark), "made_elsewhere")
    spark.range(3).write.format("delta").save(location)
    assert not spark.catalog.tableExists("made_elsewhere")
    assert table_exists(spark, "made_elsewhere")
    assert spark.table("made_elsewhere").count() == 3


def test_a_batch_commits_into_a_table_another_process_created(spark: SparkSession) -> None:
    from ingest.commit import commit_batch
    from tables.spec import TableSpec

    spec = TableSpec("made_elsewhere_for_a_batch", "id BIGINT NOT NULL", ("id",))
    location = table_location(warehouse_dir(spark), spec.name)
    spark.createDataFrame([], spec.table_schema(spark)).write.format("delta").save(location)
    assert not spark.catalog.tableExists(spec.name)

    result = commit_batch(TableWriter(spark, spec, "app"), 0, spark.range(3))

    assert (result.status, result.rows_inserted) == ("committed", 3)
    assert spark.table(spec.name).count() == 3


def test_register_all_and_create_at_the_managed_location(spark: SparkSession) -> None:
    spark.range(2).write.format("delta").save(table_location(warehouse_dir(spark), "listed_one"))
    assert "listed_one" in register_all(spark)
    assert "listed_one" not in register_all(spark)
    schema = parse_struct("id BIGINT")
    assert create_table(spark, "created_here", schema)
    detail = spark.sql("DESCRIBE DETAIL created_here").collect()[0]
    assert detail["location"].endswith("/warehouse/created_here")
    assert not create_table(spark, "created_here", schema)


def test_a_directory_without_a_commit_is_not_a_table(spark: SparkSession) -> None:
    location = local_path(table_location(warehouse_dir(spark), "half_made"))
    assert location is not None
    (location / "_delta_log").mkdir(parents=True)
    assert not table_exists(spark, "half_made")


def test_has_commit_looks_at_the_log_itself(tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.tmp").write_text("{}")
    assert not has_commit(tmp_path / "t")
    (log / "00000000000000000000.json").write_text("{}")
    assert has_commit(tmp_path / "t")
