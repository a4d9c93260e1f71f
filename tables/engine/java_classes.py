"""The project's own JVM classes (`tables/engine/java/*.java`), compiled once into one cached JAR.

Some decisions must run inside Spark's JVM: the read-only guard judges plans the JDBC server
never hands to Python, and the line scan reads files inside tasks without holding a line in
memory. The sources ship with the package and are compiled with the JDK's `javac` against
PySpark's JARs on first use, into the JAR cache, keyed by the sources and Spark's version; every
embedded session and Spark Connect server puts the JAR on its class paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pyspark

from tables.engine.connectors import cache_root, locked
from tables.errors import SessionError

_SOURCES = Path(__file__).with_name("java")


def project_jar() -> Path:
    """The compiled classes' JAR, built on first use; SessionError without a JDK's javac."""
    return compiled_jar("lakehouse-classes", sorted(_SOURCES.glob("*.java")))


def logstore_jar(delta_storage: Sequence[Path]) -> Path:
    """The conditional-write log store's JAR (`java/logstore/`), compiled against Delta's
    storage JAR, which only sessions with tables on object storage load."""
    return compiled_jar(
        "lakehouse-logstore", sorted((_SOURCES / "logstore").glob("*.java")), delta_storage
    )


def compiled_jar(name: str, sources: Sequence[Path], classpath: Sequence[Path] = ()) -> Path:
    """`sources` compiled into `<cache>/<name>-<digest>/<name>.jar` once, keyed by the sources,
    the extra class path's file names and Spark's version."""
    digest = hashlib.sha256(pyspark.__version__.encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    for entry in classpath:
        digest.update(entry.name.encode() + b"\0")
    target = cache_root() / f"{name}-{digest.hexdigest()[:16]}"
    jar = target / f"{name}.jar"
    if jar.is_file():
        return jar
    target.mkdir(parents=True, exist_ok=True)
    with locked(target / ".lock"):
        if not jar.is_file():
            _compile(sources, jar, classpath)
    return jar


def _compile(sources: Sequence[Path], jar: Path, extra: Sequence[Path]) -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise SessionError(
            "javac not found: the project's JVM classes (the read-only guard of `lakehouse sql` "
            "and `serve`, the line scan of long records) are compiled once with a JDK 17's "
            "javac; install a JDK (not only a JRE)"
        )

    classpath = os.pathsep.join(
        [str(Path(pyspark.__file__).parent / "jars" / "*"), *map(str, extra)]
    )
    with tempfile.TemporaryDirectory(prefix="lakehouse-classes-") as build:
        done = subprocess.run(
            [javac, "--release", "17", "-cp", classpath, "-d", build, *map(str, sources)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SessionError(f"javac could not build the project's classes: {done.stderr[:300]}")
        staging = jar.with_suffix(".partial")
        with zipfile.ZipFile(staging, "w") as archive:
            for path in sorted(Path(build).rglob("*.class")):
                archive.write(path, path.relative_to(build).as_posix())
        staging.replace(jar)
