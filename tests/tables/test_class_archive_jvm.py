"""The class archive with real driver JVMs: the first start writes it, the next one maps it."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tables.engine.class_archive import ARCHIVE_ENV
from tables.engine.connectors import CACHE_ENV, delta_classpath_file
from tests.support.processes import child_env

pytestmark = pytest.mark.slow

DRIVER = (
    "import sys; from tables.engine.session import get_spark; "
    "print(get_spark(sys.argv[1]).range(3).count())"
)
SAVING = (
    "lakehouse: saving the JVM's class archive for faster starts (once per Java and class path)"
)


def _start_driver(home: Path, cache: Path, java_tool_options: str = "") -> tuple[str, str]:
    env = {**child_env(), CACHE_ENV: str(cache), ARCHIVE_ENV: "on"}
    if java_tool_options:
        env["JAVA_TOOL_OPTIONS"] = java_tool_options
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def test_a_second_driver_maps_the_classes_the_first_one_archived(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The test session remembered Delta's class path; a new cache starts from that file only.
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(delta_classpath_file(), cache / delta_classpath_file().name)

    out, err = _start_driver(tmp_path / "home", cache)
    assert out == "3\n"
    assert err.splitlines() == [SAVING]  # one line at exit, nothing else
    archives = list(cache.glob("classes-*.jsa"))
    assert len(archives) == 1
    assert archives[0].stat().st_size > 10_000_000
    with open(archives[0].with_suffix(".lock")) as lock:  # the writer let its lock go
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert not list(cache.glob("classes-*.partial"))

    logs = tmp_path / "class-load"
    logs.mkdir()
    out, err = _start_driver(
        tmp_path / "home", cache, f"-Xlog:class+load=info:file={logs}/jvm-%p.log"
    )
    assert out == "3\n"
    assert SAVING not in err
    loaded = "\n".join(log.read_text() for log in logs.glob("jvm-*.log"))
    assert "org.apache.spark.sql.SparkSession source: shared objects file (top)" in loaded
    assert "io.delta.sql.DeltaSparkSessionExtension source: shared objects file (top)" in loaded
