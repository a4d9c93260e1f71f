"""A local S3-API server for the object-store tests: s3proxy on 127.0.0.1, on a temp directory.

s3proxy (Maven Central, `org.gaul:s3proxy`) with its `filesystem-nio2` store creates an object
with a hard link, so two conditional PUTs (`If-None-Match: *`) of one key cannot both win, as on
S3; moto's check-then-store lets two racers win now and then, which the log store's race test
would blame on the store. A bucket is a directory of the store's root, made before the start.
It checks AWS signatures (v2 and v4) against one identity, which the tests pass through the
environment as S3A and delta-rs read it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from pyarrow import fs

from tables.engine.connectors import cache_root, dependency, maven_fetch
from tables.engine.object_store import StorageSpec
from tests.support.servers import LOOPBACK, free_port, wait_for_port

S3PROXY_VERSION = "4.1.0"
ACCESS_KEY = "lakehouse-test"
SECRET_KEY = "lakehouse-test-secret"
REGION = "us-east-1"


#: A small JVM, as the Kafka broker's: the machine also runs Spark. Serving the eight racing
#: writers of tests/tables/test_object_store.py, s3proxy took 109 CPU-s with both compilers and
#: 101 with C1 alone (2026-12-02).
S3PROXY_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def s3proxy_jar() -> Path:
    """s3proxy's self-contained JAR, fetched once into the JAR cache."""
    jars = maven_fetch(
        cache_root() / f"s3proxy-{S3PROXY_VERSION}",
        (
            dependency(
                "org.gaul",
                "s3proxy",
                S3PROXY_VERSION,
                alone=True,
                classifier="jar-with-dependencies",
            ),
        ),
    )
    return next(jars.glob("s3proxy-*.jar"))


@dataclass
class S3Server:
    """A running s3proxy: its endpoint, its root directory, and the buckets made in it."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL, as S3A's `fs.s3a.endpoint` and delta-rs take it."""
        return f"http://{LOOPBACK}:{self.port}"

    def bucket(self, name: str) -> str:
        """Make bucket `name` (once) and return its `s3a://` root."""
        (self.root / "data" / name).mkdir(parents=True, exist_ok=True)
        return f"s3a://{name}"

    def storage(self) -> StorageSpec:
        """The `[lakehouse.storage]` that reaches this server."""
        return StorageSpec(endpoint=self.endpoint, region=REGION, path_style=True)

    def storage_toml(self) -> str:
        """The same, as a config file's `[lakehouse.storage]` table."""
        return (
            f'[lakehouse.storage]\nendpoint = "{self.endpoint}"\nregion = "{REGION}"\n'
            "path_style = true\n"
        )

    @staticmethod
    def credentials() -> dict[str, str]:
        """The environment variables S3A's and delta-rs's credential chains read."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs's `storage_options` for this server (its put-if-absent commits are the
        default)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Upload an object through the S3 API (a file written into the store's directory has
        no entity tag, which S3A's change detection requires of what it reads)."""
        client = fs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            region=REGION,
            endpoint_override=f"{LOOPBACK}:{self.port}",
            scheme="http",
            force_virtual_addressing=False,
        )
        with client.open_output_stream(f"{bucket}/{key}") as out:
            out.write(data)

    def objects(self, bucket: str, prefix: str = "") -> list[str]:
        """The keys under `prefix` in `bucket`, from the store's directory (sorted)."""
        base = self.root / "data" / bucket
        return sorted(
            p.relative_to(base).as_posix()
            for p in (base / prefix).rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )

    def __enter__(self) -> S3Server:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java not found: s3proxy runs on the JVM")
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        properties = self.root / "s3proxy.properties"
        properties.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={ACCESS_KEY}",
                    f"s3proxy.credential={SECRET_KEY}",
                    "jclouds.provider=filesystem-nio2",
                    f"jclouds.filesystem.basedir={self.root / 'data'}",
                    "",
                ]
            )
        )
        log = self.root / "s3proxy.log"
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [
                    java,
                    *S3PROXY_JVM_OPTIONS,
                    "-jar",
                    str(s3proxy_jar()),
                    "--properties",
                    str(properties),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_for_port(self.port, 60, "s3proxy", log, self.process)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def start_s3_server(root: Path) -> S3Server:
    """An s3proxy on a free port of 127.0.0.1 over `root` (enter it to start it)."""
    return S3Server(root, free_port())
