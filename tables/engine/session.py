"""The one place that builds or finds the Spark session.

On a bare machine it builds an embedded default: local Spark with Delta's SQL extension and
catalog, JARs resolved through `configure_spark_with_delta_pip` (cached after the first run), and
a persistent warehouse directory under the lakehouse home whose tables every process finds by
name (`tables.delta.warehouse`), or a shared Hive metastore (`tables.engine.catalogs`). Under
spark-submit the submitted JVM gets the same home and catalog; on Databricks the workspace's session
is used as it is.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession

from tables.engine.catalogs import CatalogSpec
from tables.engine.class_archive import ArchivePlan, release, with_class_archive, write_at_exit
from tables.engine.confs import GUARD_EXTENSION, HOME_CONF
from tables.engine.connectors import (
    cache_root,
    cached_delta_classpath,
    fetch_spark_kafka_jars,
    remember_delta_classpath,
    resolved_jars,
)
from tables.engine.java_classes import project_jar
from tables.engine.jvm import gateway_process, is_classic, is_jvm_running, stop_active_context
from tables.engine.metastore import schema_ready
from tables.engine.object_store import local_log_store, object_store_jars
from tables.engine.secrets import secrets_for_launch, split_secrets
from tables.engine.serve_token import authenticated_url, client_token, connect_failure
from tables.engine.sizing import embedded_sizing, local_cores
from tables.errors import SessionError, first_line
from tables.identifiers import shorten

DEFAULT_HOME = Path(".lakehouse")
_LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"

#: Settings of the embedded local session (a laptop or CI box, not a cluster) besides its sizing.
#: Adaptive execution is off: with shuffles already sized to the local cores it has nothing to
#: coalesce, and it runs each shuffle stage of a query as a Spark job of its own, which on a
#: micro-batch of tens of thousands of rows costs more than the stage (a batch's count and hash
#: took 4 jobs instead of 1). PySpark's DataFrame debugging is off: with it, every `functions`
#: call records its Python call site in the JVM (four py4j round trips each), about 0.15 s of a
#: batch commit's plan building; errors still name the failing query, without the Python line.
EMBEDDED_DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        # A batch holds each record twice while it is classified (its columns and its exact text),
        # and a task builds a row at a time: records up to the 16 MiB limit (docs/records.md) need
        # more than Spark's 1g default heap when several meet in one batch.
        "spark.driver.memory": "2g",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # With the UI off nobody reads what Spark's status store keeps (1,000 jobs, stages and SQL
        # executions, 100,000 tasks by default): a long run's heap grew with it (make soak).
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.ui.retainedTasks": "2000",
        "spark.sql.ui.retainedExecutions": "50",
        # Spark keeps 100 compiled plan classes; a stream batch's plans are more, so each batch
        # compiled them again (58 compilations a one-batch run, 2 with room). Not 2,000: Delta
        # compiles a ~110 KB class per checkpoint that no later batch needs, and a long run's
        # heap grew with them until the cache was full. docs/benchmarks.md#compiled-code-cache.
        "spark.sql.codegen.cache.maxEntries": "200",
        # A batch is persisted once per commit and read twice (its figures, its write), then
        # dropped: compressing its cached columns cost more than it saved (a 2,000,000-row
        # commit 12.6 s instead of 15.4, a 20,000-row one 2.74 s instead of 2.92, A/B on
        # 2026-12-02; docs/benchmarks.md#batch-cache). It spills to disk as before when memory
        # runs short.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
)
_REMOTE_URL = re.compile(r"sc://[A-Za-z0-9.\-]+:[0-9]{1,5}(?:/;[A-Za-z0-9_=;.\-]*)?")


def close_connect_session(spark: SparkSession) -> None:
    """Close a Spark Connect session's channel (nothing for a classic session), quietly."""
    if is_classic(spark):
        return  # its `client` raises: a classic session has none
    connect: Any = spark
    with contextlib.suppress(Exception):
        connect.client.close()


def connect_session(url: str, home: Path | str | None = None) -> SparkSession:
    """A Spark Connect session on the server at `url` (`sc://HOST:PORT`), checked for its home.

    A server started by `lakehouse serve` serves one lakehouse home; commands run through it must
    mean the same tables, so a config whose home is another is refused in one line.
    """
    if not _REMOTE_URL.fullmatch(url):
        raise SessionError(
            f"--remote {shorten(url)} is not a Spark Connect URL: use sc://HOST:PORT"
        )
    wanted = _resolve_home(home)
    try:  # with the token of the home's server (`serve_token`)
        token = client_token(wanted, os.environ)
        spark = SparkSession.builder.remote(authenticated_url(url, token)).getOrCreate()
        served = spark.conf.get(HOME_CONF, None)
    except ImportError as exc:
        raise SessionError(
            "the Spark Connect client is not installed: pip install 'lakehouse-ingest[connect]'"
        ) from exc
    except Exception as exc:
        raise SessionError(connect_failure(url, wanted, token, exc, os.environ)) from exc
    # PySpark's client sends a clean-up call at interpreter exit and retries it for minutes when
    # the server is gone; closing the channel first makes that call fail at once.
    atexit.register(close_connect_session, spark)
    if served is not None and Path(served) != wanted:
        raise SessionError(
            f"the Spark Connect server at {url} serves the lakehouse home {served}, but this "
            f"config's home is {wanted}: run the command with that server's config"
        )
    return spark


def is_cluster_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Return True when running under spark-submit or on Databricks, where a session exists."""
    env = os.environ if environ is None else environ
    return "PYSPARK_GATEWAY_PORT" in env or "DATABRICKS_RUNTIME_VERSION" in env


def java_available(environ: Mapping[str, str] | None = None) -> bool:
    """Return True if a `java` executable can be found through JAVA_HOME or PATH."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return True
    return shutil.which("java", path=env.get("PATH")) is not None


def get_spark(
    home: Path | str | None = None,
    *,
    app_name: str = "lakehouse",
    extra_conf: Mapping[str, str] | None = None,
    kafka: bool = False,
    catalog: CatalogSpec | None = None,
    driver_classpath: Sequence[Path] = (),
) -> SparkSession:
    """Return the active Spark session, or build one rooted at `home` with `catalog`.

    `home` holds the warehouse; it defaults to `$LAKEHOUSE_HOME` or `./.lakehouse`. `catalog`
    defaults to the embedded warehouse catalog, which any number of processes share. On
    Databricks the workspace's session and catalog are used as they are. Under spark-submit the
    session is built on the submitted JVM with the same home and catalog, so a scheduled job's
    tables land where `lakehouse status` finds them. `extra_conf` overrides the embedded defaults
    (it is ignored when a session already exists), but for the driver's Java options, which it adds
    to the session's own. With `kafka`, the embedded session also loads
    Spark's Kafka connector (`tables.engine.connectors`). `driver_classpath` goes on the driver
    JVM's own class path (the JDBC server needs Delta there).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    chosen = catalog or CatalogSpec()
    root = _resolve_home(home)
    if "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return SparkSession.builder.appName(app_name).getOrCreate()
    if is_cluster_environment():
        builder = SparkSession.builder.appName(app_name)
        for key, value in {**delta_conf(), **chosen.session_conf(root)}.items():
            builder = builder.config(key, value)
        return _checked(builder.getOrCreate(), chosen)
    settings = embedded_settings(
        root, chosen, kafka=kafka, extra_conf=extra_conf, driver_classpath=driver_classpath
    )
    return _build_embedded(root, app_name, chosen, settings)


def embedded_settings(
    home: Path,
    catalog: CatalogSpec,
    *,
    kafka: bool = False,
    extra_conf: Mapping[str, str] | None = None,
    driver_classpath: Sequence[Path] = (),
) -> dict[str, str]:
    """Every Spark setting of a lakehouse JVM on this machine, but Delta's own JARs.

    Delta, the read-only guard and the catalog of `home`; the local defaults and partition sizes;
    Kafka's connector if asked. The embedded session and the Spark Connect server that `lakehouse
    serve` starts are configured from here, so both see the same tables the same way.
    """
    # The driver's own class path: the metastore's JDBC driver (DataNucleus loads it there), the
    # read-only guard (the JDBC server's threads load SQL extensions there) and the log store of
    # local tables with Delta's storage JAR it extends (an S3 session's JARs hold these too).
    store_jars, store_conf = local_log_store()
    found = (*driver_classpath, *catalog.jars(), *store_jars)
    driver_jars = [str(jar) for jar in dict.fromkeys(found)]
    extensions = delta_conf()["spark.sql.extensions"]
    classes = _project_jar()
    if classes is not None:
        driver_jars.append(str(classes))
        extensions = f"{extensions},{GUARD_EXTENSION}"
    master = os.environ.get("LAKEHOUSE_SPARK_MASTER", "local[*]")
    settings: dict[str, str] = {
        "spark.master": master,
        **delta_conf(),
        "spark.sql.extensions": extensions,
        HOME_CONF: str(home),
        **catalog.session_conf(home),
        **store_conf,
        JAVA_OPTIONS_CONF: f"-Dlog4j.configurationFile={_LOG4J_CONFIG}",
        **EMBEDDED_DEFAULTS,
        **embedded_sizing(local_cores(master, os.cpu_count())),
    }
    if driver_jars:
        settings["spark.driver.extraClassPath"] = os.pathsep.join(driver_jars)
    jars = list(driver_jars)
    if kafka:
        jars.extend(str(jar) for jar in fetch_spark_kafka_jars())
    if jars:
        settings["spark.jars"] = ",".join(jars)
    extra = extra_conf or {}
    own_options = settings[JAVA_OPTIONS_CONF]  # the log4j configuration: added to, not replaced
    settings.update(extra)
    settings[JAVA_OPTIONS_CONF] = f"{own_options} {extra.get(JAVA_OPTIONS_CONF, '')}".strip()
    return settings


def _project_jar() -> Path | None:
    """The project's JVM classes, or None where they cannot be built (no javac).

    Without them `sql` refuses to run unguarded, and long lines are not scanned (each says so).
    """
    try:
        return project_jar()
    except SessionError:
        return None


def delta_conf() -> dict[str, str]:
    """The two settings that make a session speak Delta: its SQL extension and its catalog."""
    return {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }


#: Variables that put PySpark in Spark Connect mode for the whole process (`is_remote()`), set by
#: a shell's Spark Connect setup or inherited from a parent process that opened a Connect session.
CONNECT_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")


def _resolve_home(home: Path | str | None) -> Path:
    chosen = (
        Path(home) if home is not None else Path(os.environ.get("LAKEHOUSE_HOME", DEFAULT_HOME))
    )
    return chosen.expanduser().resolve()


def _build_embedded(
    home: Path, app_name: str, catalog: CatalogSpec, settings: Mapping[str, str]
) -> SparkSession:
    """Start the embedded session; Delta's JARs from the remembered class path when there is one.

    Delta's pip configuration resolves its JARs with Ivy at every start (seconds, and Maven
    Central's availability); the first session remembers what it resolved
    (`tables.engine.connectors.remember_delta_classpath`) and later ones load those files directly,
    and map the classes an earlier JVM with the same class path loaded
    (`tables.engine.class_archive`).
    """
    if not java_available():
        raise SessionError(
            "Java not found: install a JDK 17 and put `java` on PATH or set JAVA_HOME"
        )
    forcing = [name for name in CONNECT_MODE_VARIABLES if os.environ.get(name)]
    if forcing:  # PySpark would build a Spark Connect session, or fail to, whatever is asked
        raise SessionError(
            f"the environment sets {' and '.join(forcing)}, which makes PySpark start Spark "
            "Connect sessions only: unset it for an embedded session, or pass --remote "
            "sc://HOST:PORT to use a Spark Connect server"
        )

    # The embedded session is local: bind it to loopback. Otherwise Spark picks the host's
    # external address and the JVM's reverse lookups of it wait on DNS, which on a machine
    # without a reachable resolver costs tens of seconds per start.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    # The rescue of odd JSON fields runs in Python workers: they must be this interpreter, which
    # has this package, not whatever `python3` comes first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    home.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.appName(app_name)
    cached = cached_delta_classpath()
    conf = dict(settings)
    plan = ArchivePlan("none")
    if cached is not None:
        own = [j for j in conf.get("spark.jars", "").split(",") if j]
        conf["spark.jars"] = ",".join([*(str(j) for j in cached), *own])
        if not is_jvm_running():  # the class path is known: the JVM may map its archive
            conf, plan = with_class_archive(conf, os.environ, cache_root())
    # A new JVM gets its secrets from a private file, not its command line (`secrets`).
    conf, secret = split_secrets(conf) if not is_jvm_running() else (conf, {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    log_path = home / "logs" / "spark-driver.log"
    try:
        with _output_to(log_path), secrets_for_launch(secret):
            if cached is None:
                builder = configure_spark_with_delta_pip(builder)
            spark = builder.getOrCreate()
    except Exception as exc:
        release(plan)
        raise SessionError(
            "could not start Spark with Delta: the Delta JARs could not be resolved from Maven "
            "Central and are not in the local Ivy cache (run `make setup` where Maven Central "
            f"is reachable) or the JVM failed to start; see {log_path}"
        ) from exc
    if cached is None:
        remember_delta_classpath(resolved_jars(spark))
    if plan.mode == "write":
        write_at_exit(gateway_process(spark), plan, stop_active_context)
    return _checked(spark, catalog)


@contextmanager
def _output_to(log_path: Path) -> Iterator[None]:
    """Send the JVM's stdout and stderr (Ivy's resolution report, Spark's logs) to a file.

    The driver JVM inherits the file descriptors at launch, so its output keeps going to the log
    file while this process's own output is restored when the block ends.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _checked(spark: SparkSession, catalog: CatalogSpec) -> SparkSession:
    """Open a metastore catalog now (its schema made whole first), failing here in one line."""
    if catalog.kind == "warehouse":
        return spark
    try:
        with schema_ready(spark):
            spark.sql("SHOW DATABASES").collect()
    except SessionError:
        spark.stop()
        raise
    except Exception as exc:
        spark.stop()
        raise SessionError(
            f"the Hive metastore at {catalog.url} cannot be reached or opened "
            f"({first_line(exc)[:200]}); check [lakehouse.catalog] in the config"
        ) from exc
    return spark


def _warm() -> None:
    """Cache the Delta JARs (Spark resolver) and the Kafka connector JARs (Maven); start once."""

    fetch_spark_kafka_jars()
    object_store_jars()
    with tempfile.TemporaryDirectory(prefix="lakehouse-warm-") as home:
        get_spark(home, app_name="lakehouse-setup", kafka=True).stop()
    print("Delta JARs resolved and cached; Kafka connector and S3A JARs fetched with Maven")


def _resolve() -> None:
    """Start and stop one session so its resolved Delta JARs are remembered (`lakehouse serve`)."""

    with tempfile.TemporaryDirectory(prefix="lakehouse-resolve-") as home:
        get_spark(home, app_name="lakehouse-resolve").stop()


if __name__ == "__main__":
    commands = {"--warm": _warm, "--resolve": _resolve}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit("usage: python -m tables.engine.session --warm | --resolve")
    commands[sys.argv[1]]()
