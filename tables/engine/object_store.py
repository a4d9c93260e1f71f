"""Tables on S3 (`s3a://`): the S3A connector, the conditional-write log store, and who may write.

A Delta log on S3 needs its `N.json` written once: Delta's default S3 store checks for the file
and then PUTs it, which two writers in two processes can both do. The project's log store
(`java/logstore/ConditionalS3ALogStore.java`) writes each commit file with one conditional PUT
(`If-None-Match: *`), and settles an ambiguous PUT by the write id it put in the object's
metadata; delta-rs commits the same way, so both engines may share a table (docs/deployment.md).

`[lakehouse.storage]` (`StorageSpec`) says where the S3 endpoint is and how credentials are found:
from the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or an
AWS profile, never from the config file, a command line or a Spark setting a SQL statement can
read. The JARs are hadoop-aws 3.4.2 (the Hadoop of PySpark 4.1.4) and the AWS SDK modules it was
built with, fetched with Maven into the JAR cache like the Kafka connector.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlparse

from tables.engine.connectors import cache_root, cached_delta_classpath, dependency, maven_fetch
from tables.engine.java_classes import logstore_jar
from tables.errors import ConfigError, SessionError
from tables.identifiers import shorten

#: The Hadoop of PySpark 4.1.4's `hadoop-client-api`; S3A must match it.
HADOOP_AWS_VERSION = "3.4.2"
#: The AWS SDK that hadoop-aws 3.4.2 is built with (hadoop-project-3.4.2.pom). Later SDKs send
#: checksum headers by default that this Hadoop does not handle.
AWS_SDK_VERSION = "2.29.52"
#: The SDK modules S3A loads, instead of the 612 MiB `bundle`: what `s3`, `s3-transfer-manager`,
#: `sts` and `apache-client` need, less what PySpark ships (netty, httpclient, commons, slf4j).
_SDK_MODULES = (
    "annotations", "apache-client", "arns", "auth", "aws-core", "aws-query-protocol",
    "aws-xml-protocol", "checksums", "checksums-spi", "crt-core", "endpoints-spi", "http-auth",
    "http-auth-aws", "http-auth-aws-eventstream", "http-auth-spi", "http-client-spi",
    "identity-spi", "json-utils", "metrics-spi", "profiles", "protocol-core", "regions",
    "retries", "retries-spi", "s3", "s3-transfer-manager", "sdk-core", "sts",
    "third-party-jackson-core", "utils",
)  # fmt: skip
LOG_STORE_CLASS = "lakehouse.ConditionalS3ALogStore"
#: Delta's DynamoDB log store, which a user may have installed instead (`log_store = "dynamodb"`).
DYNAMODB_LOG_STORE_CLASS = "io.delta.storage.S3DynamoDBLogStore"
LOG_STORE_CONF = "spark.delta.logStore.s3a.impl"
#: The log store of `file:` tables: Delta's, with a listing that reads names before statuses.
LOCAL_LOG_STORE_CLASS = "lakehouse.LocalListingLogStore"
LOCAL_LOG_STORE_CONF = "spark.delta.logStore.file.impl"
#: The `log_store` the config declared, as the session carries it for `assert_safe_log_store`.
DECLARED_LOG_STORE_CONF = "spark.lakehouse.storage.logStore"
#: Delta's `S3SingleDriverLogStore`, which the conditional store extends, lists `_delta_log` from
#: a start key (S3A's StartAfter) when set; the DynamoDB store lists as before.
FAST_LIST_CONF = "spark.hadoop.delta.enableFastS3AListFrom"
#: Delta 4.4's check that recognises its own commit (`commitInfo.txnId`) at a version it was
#: told is taken: a second safety net behind the write id.
IDEMPOTENCY_CHECK_CONF = "spark.databricks.delta.commit.idempotencyCheck.enabled"
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "s3n"})
Credentials = Literal["environment", "profile"]
LogStoreKind = Literal["conditional", "dynamodb"]


@dataclass(frozen=True)
class StorageSpec:
    """`[lakehouse.storage]`: the S3 endpoint of `s3a://` locations and how to reach it.

    `endpoint` is None for AWS itself (the region's endpoint); a local S3-API server is
    `http://127.0.0.1:PORT` with `path_style`. `credentials` are found in the environment or, with
    `"profile"`, in the AWS profile named by `profile` (or `AWS_PROFILE`). `log_store` is
    `"conditional"` (the project's) unless the tables are written through Delta's DynamoDB log
    store, installed by the user (`"dynamodb"`).
    """

    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False
    credentials: Credentials = "environment"
    profile: str | None = None
    log_store: LogStoreKind = "conditional"

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            parsed = urlparse(self.endpoint)
            if parsed.scheme not in {"http", "https"} or not parsed.netloc:
                raise ConfigError(
                    f"endpoint must be an http:// or https:// URL, got {self.endpoint!r}"
                )
            if parsed.username or parsed.password:
                raise ConfigError("endpoint must not carry credentials: use the environment")
        if self.credentials not in get_args(Credentials):
            raise ConfigError(
                f"credentials must be one of {get_args(Credentials)}, got {self.credentials!r}"
            )
        if self.profile is not None and self.credentials != "profile":
            raise ConfigError("profile applies to credentials = 'profile' only")
        if self.log_store not in get_args(LogStoreKind):
            raise ConfigError(
                f"log_store must be one of {get_args(LogStoreKind)}, got {self.log_store!r}"
            )

    def session_conf(self) -> dict[str, str]:
        """The Spark settings of S3A and of the log store; no credential among them."""
        conf = {
            "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.s3a.path.style.access": str(self.path_style).lower(),
            # A create does not first HEAD and LIST its path (is it there? is a parent a file?):
            # Delta's data and checksum files have new names, and a commit file's create is
            # the log store's conditional PUT, which the store itself decides.
            "spark.hadoop.fs.s3a.create.performance": "true",
            # Delta lists the log from its last checkpoint at every snapshot update; without
            # this, S3A pages through every key of `_delta_log` (1,000 a request), so each
            # listing of a long stream's log grows with it. With it, one LIST from a start key
            # (tests/tables/test_object_store.py compares both listings on a 2,729-key log).
            FAST_LIST_CONF: "true",
            IDEMPOTENCY_CHECK_CONF: "true",
            DECLARED_LOG_STORE_CONF: self.log_store,
        }
        if self.log_store == "conditional":
            conf[LOG_STORE_CONF] = LOG_STORE_CLASS
        if self.endpoint is not None:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
                urlparse(self.endpoint).scheme == "https"
            ).lower()
        if self.region is not None:
            conf["spark.hadoop.fs.s3a.endpoint.region"] = self.region
        if self.credentials == "profile":
            conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = (
                "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider"
            )
        return conf


def is_object_store(location: str) -> bool:
    """True for a location on an object store (`s3a://`, `s3://`, `s3n://`)."""
    return urlparse(location).scheme.lower() in OBJECT_STORE_SCHEMES


def validate_object_store_location(location: str) -> None:
    """Refuse an object-store location the log store does not cover: only `s3a://` is."""
    scheme = urlparse(location).scheme.lower()
    if scheme in OBJECT_STORE_SCHEMES and scheme != "s3a":
        raise ConfigError(
            f"{location}: use s3a:// (Hadoop's S3A connector, which the conditional log store "
            f"writes through), not {scheme}://"
        )


def is_safe_log_store(chosen: str | None, declared: str | None) -> bool:
    """True if `s3a://` commits through log store class `chosen` let many writers share a table.

    The project's conditional store does; Delta's DynamoDB store does when the config declares
    it (`declared`, `[lakehouse.storage] log_store`). Delta's default (`S3SingleDriverLogStore`:
    a check, then an unconditional PUT) does not, nor does any other store a user's settings name.
    """
    if chosen == LOG_STORE_CLASS:
        return True
    return chosen == DYNAMODB_LOG_STORE_CLASS and declared == "dynamodb"


def assert_safe_log_store(location: str, conf: Callable[[str], str | None]) -> None:
    """Refuse, in one line, a table at an `s3a://` `location` whose commits could overwrite each
    other; `conf` reads a session setting (None: unset). Local locations pass."""
    validate_object_store_location(location)
    if not is_object_store(location):
        return
    chosen = conf(LOG_STORE_CONF) or conf(LOG_STORE_CONF.removeprefix("spark."))
    if is_safe_log_store(chosen, conf(DECLARED_LOG_STORE_CONF)):
        return
    raise ConfigError(
        f"{shorten(location)}: commits to s3a:// would go through "
        f"{chosen or 'Delta default S3SingleDriverLogStore'}, with which two writers can "
        "overwrite each other's log entry; declare [lakehouse.storage] so the session uses "
        f'{LOG_STORE_CLASS} (or log_store = "dynamodb" with Delta\'s DynamoDB log store installed)'
    )


def fetch_s3_jars(cache_dir: Path | None = None) -> list[Path]:
    """hadoop-aws and the AWS SDK modules it needs, fetched once into the JAR cache."""
    target = cache_dir or cache_root() / f"hadoop-aws-{HADOOP_AWS_VERSION}"
    dependencies = (
        dependency("org.apache.hadoop", "hadoop-aws", HADOOP_AWS_VERSION, alone=True),
        dependency("software.amazon.eventstream", "eventstream", "1.0.1", alone=True),
        dependency("org.reactivestreams", "reactive-streams", "1.0.4", alone=True),
        *(
            dependency("software.amazon.awssdk", module, AWS_SDK_VERSION, alone=True)
            for module in _SDK_MODULES
        ),
    )
    return sorted(maven_fetch(target, dependencies).glob("*.jar"))


def object_store_jars() -> list[Path]:
    """Every JAR a session with tables on S3 adds: S3A, the SDK, and the log store with Delta's
    storage JAR it extends (the driver's class path holds the store, so it holds its parent)."""
    storage = delta_storage_jars()
    return [*fetch_s3_jars(), *storage, logstore_jar(storage)]


def local_log_store() -> tuple[list[Path], dict[str, str]]:
    """The JARs and the setting that give `file:` tables the listing log store
    (`java/logstore/LocalListingLogStore.java`): a commit's listings of `_delta_log` no longer
    grow with the log's length.

    The store is compiled against a Delta storage JAR already on this machine, never one fetched
    for it: a plain local session needs no Maven. None without one (the first session on a
    machine, before Ivy resolved Delta), or without a JDK's javac: Delta's own store lists then.
    """
    storage = delta_storage_jars(fetch=False)
    if not storage:
        return [], {}
    try:
        jar = logstore_jar(storage)
    except SessionError:
        return [], {}
    return [*storage, jar], {LOCAL_LOG_STORE_CONF: LOCAL_LOG_STORE_CLASS}


def delta_storage_jars(*, fetch: bool = True) -> list[Path]:
    """Delta's storage JAR (the `LogStore` API) of the installed delta-spark, fetched alone.

    With `fetch=False`, the one fetched before, else the one Ivy resolved for Delta's session
    (`cached_delta_classpath`), else none.
    """
    delta = version("delta-spark")
    target = cache_root() / f"delta-storage-{delta}"
    if not fetch:
        fetched = sorted((target / "jars").glob("*.jar"))  # the directory of a finished fetch
        resolved = [
            jar
            for jar in cached_delta_classpath() or []
            if jar.name.endswith(f"delta-storage-{delta}.jar")
        ]
        return fetched or resolved
    storage = maven_fetch(target, (dependency("io.delta", "delta-storage", delta, alone=True),))
    return sorted(storage.glob("*.jar"))
