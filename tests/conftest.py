"""Shared fixtures: one real Spark session with Delta for the whole run, and fresh tables."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.delta.provision import ensure_table
from tables.engine.class_archive import ARCHIVE_ENV
from tables.engine.jvm import gateway
from tables.spec import TableSpec
from tests.support.connect import Server, connect_server
from tests.support.kafka_broker import KafkaBroker
from tests.support.processes import GENERATED, INTERPRETED, SESSION_JVM_OPTIONS
from tests.support.projects import prime_class_archives

EVENT_DDL = "event_id STRING NOT NULL, user_id STRING, amount DOUBLE"
_names = itertools.count()

# This process's JVM neither maps nor writes the class archive (it starts once per run). Child
# drivers map those `child_class_archives` writes (`tests.support.processes.child_env`);
# tests/tables/test_class_archive_jvm.py writes and maps its own.
os.environ.setdefault(ARCHIVE_ENV, "off")


#: The slow tier's longest modules, longest first (seconds of a fresh clone's run, 2026-12-06:
#: 393, 370, 225, 160, 150, 124, 108, 107). pytest-xdist hands whole modules out in collection
#: order, so a long one collected last runs alone at the end: the 300-batch soak did, for about
#: its last five minutes.
LONGEST_FIRST = (
    "tests/test_soak.py",
    "tests/ingest/test_object_store_runs.py",
    "tests/ingest/test_many_processes.py",
    "tests/ingest/test_cdc.py",
    "tests/ingest/test_kafka.py",
    "tests/ingest/test_isolation_process.py",
    "tests/ingest/test_cluster.py",
    "tests/test_verify.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Collect the longest modules first, every other in its own order (a module stays whole)."""
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(scope="session", autouse=True)
def child_class_archives(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Write the child drivers' class archives once, before the first test, when any starts one.

    A run of the fast tier starts no child driver, and pays nothing.
    """
    if any(item.get_closest_marker("slow") for item in request.session.items):
        prime_class_archives(tmp_path_factory.mktemp("class-archive"))


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One Spark Connect server over a home of its own, shared by the Connect modules of a run."""
    with connect_server(tmp_path_factory.mktemp("connect-home")) as running:
        yield running


@pytest.fixture(scope="session")
def broker(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One KRaft broker per run, shared by the Kafka and CDC modules (each test its own topics).

    Its client helpers (produce, create a topic) run in the test session's JVM.
    """
    try:
        gateway(spark, "checking the Kafka connector").py4j.reflection.ReflectionUtil.classForName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider"
        )
    except Exception:
        pytest.fail("the test Spark session lacks Spark's Kafka connector (spark-sql-kafka)")
    with KafkaBroker(tmp_path_factory.mktemp("kafka"), spark=spark) as running:
        yield running


@pytest.fixture(scope="session")
def lakehouse_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse, metastore and checkpoint root of the test session."""
    return tmp_path_factory.mktemp("lakehouse-home")


@pytest.fixture(scope="session")
def spark(lakehouse_home: Path) -> Iterator[SparkSession]:
    """One local[2] Spark session with Delta, Kafka and the warehouse catalog; UI off."""
    from pyspark.sql.utils import is_remote

    from tables.engine.session import get_spark

    if is_remote():
        pytest.fail(
            "this process already runs Spark Connect sessions, and PySpark allows one mode per "
            "process: run the Spark Connect tests on their own (`pytest -m connect`)"
        )

    os.environ.setdefault("LAKEHOUSE_SPARK_MASTER", "local[2]")
    session = get_spark(
        lakehouse_home,
        app_name="lakehouse-tests",
        kafka=True,
        extra_conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
            # Its tables hold a few rows: generating and compiling each plan's Java code (Janino,
            # then the JIT on the classes) cost more than running it (CONTRIBUTING.md#test-tiers).
            **INTERPRETED,
            "spark.driver.extraJavaOptions": SESSION_JVM_OPTIONS,
        },
    )
    yield session
    session.stop()


@pytest.fixture
def generated_code(spark: SparkSession) -> Iterator[None]:
    """Spark's default for the test: whole-stage code generation, compiled expressions."""
    for key, value in GENERATED.items():
        spark.conf.set(key, value)
    yield
    for key, value in INTERPRETED.items():
        spark.conf.set(key, value)


@pytest.fixture
def make_table(spark: SparkSession) -> Callable[..., TableSpec]:
    """Create a fresh, uniquely named target table from a spec and return the spec."""

    def make(
        schema: str = EVENT_DDL, keys: tuple[str, ...] = ("event_id",), **kwargs: object
    ) -> TableSpec:
        spec = TableSpec(name=f"t_{next(_names)}", schema_ddl=schema, keys=keys, **kwargs)  # type: ignore[arg-type]
        ensure_table(spark, spec)
        return spec

    return make
