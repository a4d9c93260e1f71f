"""A real single-node Kafka broker (KRaft mode) for tests, run from Kafka's own JARs.

Nothing is installed system-wide and nothing but Java and Maven is needed:

- `fetch_kafka_jars()` resolves `org.apache.kafka:kafka_2.13:KAFKA_VERSION` with its runtime
  dependencies (plus log4j's slf4j binding, so the broker's logs reach its log file) from Maven
  Central with `mvn dependency:copy-dependencies`, into a cache directory. A stamp file makes a
  second call free; changing a pin below fetches again.
- `KafkaBroker` formats a KRaft storage directory with Kafka's `StorageTool`, starts `kafka.Kafka`
  as a child JVM on 127.0.0.1 with free ports (one for clients, one for the controller), waits
  until it serves requests, and stops it (SIGTERM, then SIGKILL) when the `with` block ends.
- Topic creation, producing, deleting records and listing offsets go through Kafka's Java client
  inside the given Spark session's JVM (py4j), so they cost milliseconds instead of a JVM start
  each. The client JARs are the ones the Spark Kafka connector brings (`kafka-clients`).

The JARs are cached like the Spark Kafka connector's (`tables/engine/connectors.py`).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.engine.connectors import cache_root, dependency, maven_fetch
from tables.engine.jvm import gateway
from tables.engine.jvm.conditions import java_class_names

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The newest kafka_2.13 release whose whole dependency tree resolves from Maven Central here
#: (4.4.0's `kafka-tools-api` is missing there). KRaft only: Kafka 4 has no ZooKeeper mode.
KAFKA_VERSION = "4.3.1"
#: Kafka 4.3.1's own log4j version; its slf4j 1.x binding routes the broker's logs to log4j.
LOG4J_VERSION = "2.25.4"

#: Small, quick-starting JVMs: the machine also runs Spark.
BROKER_JVM_OPTIONS = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
_READY_LINE = "Kafka Server started"
_LOG_TAIL_LINES = 25


class KafkaBrokerError(RuntimeError):
    """The broker's JARs could not be fetched, or the broker did not start or stop cleanly."""


def fetch_kafka_jars(cache_dir: Path | None = None) -> Path:
    """The directory holding the Kafka broker's JARs, fetched with Maven on first use.

    `cache_dir` defaults to `cache_root() / f"kafka-{KAFKA_VERSION}"`. Dependencies are
    transitive (Maven's runtime scope), as in Kafka's own distribution.
    """
    target = cache_dir or cache_root() / f"kafka-{KAFKA_VERSION}"
    dependencies = (
        dependency("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
        dependency("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
    )
    return maven_fetch(target, dependencies)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaBrokerError("Java not found: install a JDK 17 and put `java` on PATH")
    return found


def _free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now (all sockets held open until every port is chosen)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes, URL-safe base64 without padding, no leading '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _api_versions_ok(port: int, timeout: float = 2.0) -> bool:
    """True if a Kafka ApiVersions v0 request on the port gets an error-free answer."""
    client_id = b"lakehouse-probe"
    header = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(header)) + header)
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            correlation, error = struct.unpack(">ih", _read_exactly(sock, min(size, 6)))
    except (OSError, struct.error):
        return False
    return bool(correlation == 7 and error == 0)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


class KafkaBroker:
    """A single-node KRaft broker in a child JVM, listening on 127.0.0.1 only.

    ```python
    with KafkaBroker(tmp_path, spark=spark) as broker:
        broker.create_topic("events", partitions=2)
        broker.produce("events", [("k1", '{"event_id": "e1"}'), (None, "not json")])
        spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap) ...
    ```

    Everything the broker writes (config, data, `broker.log`) stays under `workdir`. `spark` is
    only needed for the client helpers (`create_topic`, `produce`, ...); its session must have
    the Kafka connector's JARs (`fetch_spark_kafka_jars`). `config` adds or overrides broker
    properties.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        spark: SparkSession | None = None,
        jars: Path | None = None,
        config: Mapping[str, str] | None = None,
        startup_timeout: float = 90.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.log_path = self.workdir / "broker.log"
        self._spark = spark
        self._jars = jars
        self._config = dict(config or {})
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._admin: Any = None
        self._producer: Any = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers string for clients: `127.0.0.1:<port>`."""
        if self._port is None:
            raise KafkaBrokerError("the broker is not started")
        return f"127.0.0.1:{self._port}"

    def start(self) -> KafkaBroker:
        """Format storage, start the broker and wait until it serves requests."""
        if self._process is not None:
            raise KafkaBrokerError("the broker is already started")
        jars = self._jars or fetch_kafka_jars()
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [_java(), *BROKER_JVM_OPTIONS, f"-Dlog4j2.configurationFile={self._log4j()}"]
        command += ["-cp", str(jars / "*")]
        # The storage does not record listener ports (static quorum): format with placeholder
        # ports, then pick free ones just before the broker binds them.
        properties = self._write_config(19092, 19093)
        format_storage = ["kafka.tools.StorageTool", "format", "--ignore-formatted"]
        formatted = subprocess.run(
            [*command, *format_storage, "-t", _cluster_id(), "-c", properties],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if formatted.returncode != 0:
            output = " | ".join((formatted.stdout + formatted.stderr).strip().splitlines()[-5:])
            raise KafkaBrokerError(f"kafka-storage format failed: {output}")
        broker_port, controller_port = _free_ports(2)
        properties = self._write_config(broker_port, controller_port)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [*command, "kafka.Kafka", properties],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        _running.add(self)
        self._port = broker_port
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Close the clients, then SIGTERM the broker and SIGKILL it after `timeout` seconds."""
        for client in (self._producer, self._admin):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close(_java_duration(self._java(), 5))
        self._producer = self._admin = None
        _running.discard(self)
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def _write_config(self, broker_port: int, controller_port: int) -> str:
        properties = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.retention.check.interval.ms": "1000",
            **self._config,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        return str(path)

    def _log4j(self) -> Path:
        path = self.workdir / "log4j2.properties"
        path.write_text(
            "rootLogger.level = info\n"
            "rootLogger.appenderRef.stdout.ref = stdout\n"
            "appender.stdout.type = Console\n"
            "appender.stdout.name = stdout\n"
            "appender.stdout.layout.type = PatternLayout\n"
            "appender.stdout.layout.pattern = [%d] %p %m (%c)%n\n"
            # Request logs and the controller's per-event lines are noise at info.
            "logger.request.name = kafka.request.logger\n"
            "logger.request.level = warn\n"
        )
        return path

    def _wait_ready(self) -> None:
        """Poll until the broker logs that it started and answers an ApiVersions request.

        Kafka logs `Kafka Server started` once the broker is registered with the controller
        and unfenced, i.e. able to host partitions; the ApiVersions round trip shows the client
        listener is serving the Kafka protocol.
        """
        assert self._process is not None
        assert self._port is not None
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise KafkaBrokerError(
                    f"the Kafka broker exited with code {code} while starting; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if _READY_LINE in self._log_text() and _api_versions_ok(self._port):
                return
            time.sleep(0.25)
        raise KafkaBrokerError(
            f"the Kafka broker was not ready within {self._startup_timeout:.0f} s; "
            f"last lines of {self.log_path}:\n{self.log_tail()}"
        )

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines of the broker's log, for error messages."""
        return "\n".join(self._log_text().splitlines()[-lines:])

    # -- clients (Kafka's Java client inside the Spark session's JVM) --------------------------

    def _java(self) -> Any:
        if self._spark is None:
            raise KafkaBrokerError(
                "KafkaBroker(spark=...) is needed for client helpers: they use its JVM"
            )
        return gateway(self._spark, "the test Kafka broker's clients")

    def _properties(self, extra: Mapping[str, str]) -> Any:
        props = self._java().java.util.Properties()
        props.setProperty("bootstrap.servers", self.bootstrap)
        for key, value in extra.items():
            props.setProperty(key, value)
        return props

    def admin(self) -> Any:
        """The broker's Kafka `AdminClient` (a py4j proxy), created on first use."""
        if self._admin is None:
            jvm = self._java()
            props = self._properties({"client.id": "lakehouse-test-admin"})
            self._admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
        return self._admin

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic (replication factor 1) and wait until every partition has a leader."""
        jvm = self._java()
        optional = jvm.java.util.Optional
        topic = jvm.org.apache.kafka.clients.admin.NewTopic(
            name, optional.of(partitions), optional.empty()
        )
        if config:
            topic = topic.configs(dict(config))
        self._wait(self.admin().createTopics([topic]).all())
        deadline = time.monotonic() + 30
        while len(self._offsets_once_known(name)) < partitions:
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"topic {name} has no leader for every partition")
            time.sleep(0.1)

    def _offsets_once_known(self, topic: str) -> dict[int, int]:
        """The topic's latest offsets, or none while the broker does not yet serve a partition.

        A created topic reaches the broker's metadata a moment later: until then `describeTopics`
        or `listOffsets` fails with UnknownTopicOrPartition (one fresh-clone run met it) or
        LeaderNotAvailable.
        """
        try:
            return self.latest_offsets(topic)
        except Exception as exc:
            if java_class_names(exc) & _NOT_YET_SERVED:
                return {}
            raise

    def produce(
        self,
        topic: str,
        messages: Sequence[tuple[str | None, str | None]],
        partition: int | None = None,
    ) -> list[tuple[int, int]]:
        """Send (key, value) string messages, acks=all, in order; return (partition, offset)s.

        With `partition=None` the default partitioner places each message by its key.
        """
        jvm = self._java()
        if self._producer is None:
            serializer = "org.apache.kafka.common.serialization.StringSerializer"
            props = self._properties(
                {
                    "client.id": "lakehouse-test-producer",
                    "acks": "all",
                    "enable.idempotence": "false",
                    "linger.ms": "0",
                    "key.serializer": serializer,
                    "value.serializer": serializer,
                }
            )
            self._producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(props)
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord
        futures = [
            self._producer.send(record(topic, partition, key, value)) for key, value in messages
        ]
        self._producer.flush()
        sent = [self._wait(future) for future in futures]
        return [(int(meta.partition()), int(meta.offset())) for meta in sent]

    def delete_records(self, topic: str, before: Mapping[int, int]) -> None:
        """Delete each partition's records below an offset, as retention would.

        The partition's log start offset (its earliest available offset) moves to the offset.
        """
        jvm = self._java()
        assert self._spark is not None
        gateway: Any = self._spark.sparkContext._gateway
        # py4j cannot call `RecordsToDelete.beforeOffset(long)` directly: the class also has an
        # instance method of that name. Java reflection can.
        signature = gateway.new_array(jvm.java.lang.Class, 1)
        signature[0] = jvm.java.lang.Long.TYPE
        before_offset = jvm.py4j.reflection.ReflectionUtil.classForName(
            "org.apache.kafka.clients.admin.RecordsToDelete"
        ).getMethod("beforeOffset", signature)
        request = {}
        for partition, offset in before.items():
            args = gateway.new_array(jvm.java.lang.Object, 1)
            args[0] = jvm.java.lang.Long.valueOf(str(offset))
            request[jvm.org.apache.kafka.common.TopicPartition(topic, partition)] = (
                before_offset.invoke(None, args)
            )
        self._wait(self.admin().deleteRecords(request).all())

    def earliest_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's earliest available offset (its log start offset)."""
        return self._list_offsets(topic, "earliest")

    def latest_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's next offset to be written (its log end offset)."""
        return self._list_offsets(topic, "latest")

    def _list_offsets(self, topic: str, which: str) -> dict[int, int]:
        jvm = self._java()
        admin_pkg = jvm.org.apache.kafka.clients.admin
        described = self._wait(self.admin().describeTopics([topic]).allTopicNames())
        spec = getattr(admin_pkg.OffsetSpec, which)()
        request = {
            jvm.org.apache.kafka.common.TopicPartition(topic, info.partition()): spec
            for info in described.get(topic).partitions()
        }
        listed = self._wait(self.admin().listOffsets(request).all())
        return {int(tp.partition()): int(listed.get(tp).offset()) for tp in listed.keySet()}

    def _wait(self, future: Any, seconds: int = 30) -> Any:
        unit = self._java().java.util.concurrent.TimeUnit.SECONDS
        return future.get(seconds, unit)


#: Kafka's errors for a partition the broker's metadata does not have a leader for yet.
_NOT_YET_SERVED = frozenset(
    {
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
        "org.apache.kafka.common.errors.LeaderNotAvailableException",
    }
)


def _java_duration(jvm: Any, seconds: int) -> Any:
    return jvm.java.time.Duration.ofSeconds(seconds)


#: Brokers started and not yet stopped: stopped at interpreter exit should a test run end
#: without its teardown. (The broker shares the terminal's process group, so Ctrl-C reaches it.)
_running: set[KafkaBroker] = set()


@atexit.register
def _stop_leftovers() -> None:
    for broker in list(_running):
        broker.stop()
