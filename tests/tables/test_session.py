"""Session decisions that need no JVM: where a session comes from, whether Java is there."""

from __future__ import annotations

from pathlib import Path

from tables.session import is_cluster_environment, java_available


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
