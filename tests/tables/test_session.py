"""Session decisions that need no JVM: where a session comes from, whether Java is there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.engine.catalogs import CatalogSpec
from tables.engine.session import (
    JAVA_OPTIONS_CONF,
    embedded_settings,
    is_cluster_environment,
    java_available,
)
from tables.engine.sizing import embedded_sizing, local_cores


def test_cluster_environments_reuse_their_session() -> None:
    assert is_cluster_environment({"PYSPARK_GATEWAY_PORT": "40123"})
    assert is_cluster_environment({"DATABRICKS_RUNTIME_VERSION": "17.3"})
    assert not is_cluster_environment({"PATH": "/usr/bin"})


def test_java_is_found_through_java_home_or_path(tmp_path: Path) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    assert java_available({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": ""})
    assert java_available({"PATH": str(java.parent)})
    assert not java_available({"PATH": str(tmp_path)})


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[*]", 16), ("local[4, 3]", 4), (" local[3] ", 3)],
)
def test_local_masters_name_their_cores(master: str, cores: int) -> None:
    assert local_cores(master, cpu_count=16) == cores


def test_cluster_masters_have_no_known_size() -> None:
    assert local_cores("spark://head:7077", cpu_count=16) is None
    assert local_cores("yarn", cpu_count=16) is None
    assert local_cores("local[*]", cpu_count=None) == 1


def test_embedded_partitions_follow_the_cores_up_to_eight() -> None:
    assert embedded_sizing(2)["spark.databricks.delta.snapshotPartitions"] == "2"
    assert embedded_sizing(2)["spark.sql.shuffle.partitions"] == "2"
    assert set(embedded_sizing(64).values()) == {"8"}
    assert set(embedded_sizing(None).values()) == {"8"}


def test_extra_driver_java_options_are_added_to_the_sessions_own(tmp_path: Path) -> None:
    """A caller's driver options (a collector, a property) must not drop the log4j configuration."""
    plain = embedded_settings(tmp_path, CatalogSpec())[JAVA_OPTIONS_CONF]
    assert plain.startswith("-Dlog4j.configurationFile="), plain
    assert len(plain.split()) == 1, plain
    extra = {JAVA_OPTIONS_CONF: "-XX:+UseParallelGC", "spark.sql.shuffle.partitions": "3"}
    settings = embedded_settings(tmp_path, CatalogSpec(), extra_conf=extra)
    assert settings[JAVA_OPTIONS_CONF] == f"{plain} -XX:+UseParallelGC"
    assert settings["spark.sql.shuffle.partitions"] == "3"
