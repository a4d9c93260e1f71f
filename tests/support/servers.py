"""Servers the slow tier starts on 127.0.0.1 and always stops: PostgreSQL, a Spark standalone
cluster, `lakehouse serve`; and a beeline client for the JDBC endpoint.

Each is a context manager. A server that does not come up raises with the tail of its log, so a
failure says why.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Literal

import pyspark

from tests.support.processes import child_env, child_jvm_options

SPARK_HOME = Path(pyspark.__file__).parent
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on now, below the kernel's range for ports it assigns itself.

    A server is told its port seconds before it binds it (a JVM starts first). A port from the
    kernel's own range, which binding to port 0 gives, can meanwhile go to any socket the kernel
    numbers itself (a client connection, a Spark driver's port 0), and the server then fails to
    bind: that made a `serve` test fail now and then. Ports below the range go to no one unasked.
    """
    low = _assigned_ports_start()
    candidates = list(range(max(1024, low - 12_000), low))
    random.shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket() as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _assigned_ports_start() -> int:
    """The first port of the range the kernel numbers sockets from (Linux's; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def wait_for_port(
    port: int,
    timeout: float,
    what: str,
    log: Path | None = None,
    process: subprocess.Popen[bytes] | None = None,
) -> None:
    """Wait until something accepts connections on 127.0.0.1:port (or `process` has ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (process is None or process.poll() is None):
        with socket.socket() as probe:
            probe.settimeout(1.0)
            if probe.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    ended = "" if process is None or process.poll() is None else f" (exit {process.returncode})"
    raise RuntimeError(
        f"{what} did not listen on {LOOPBACK}:{port} in {timeout:.0f} s{ended}\n{tail}"
    )


def _stop(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def postgres_binary(name: str) -> str | None:
    """A PostgreSQL program, or None: Debian keeps the server's under /usr/lib/postgresql/N/bin."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def postgres_missing() -> str | None:
    """Why a throwaway PostgreSQL cluster cannot be started here, or None when it can."""
    missing = [name for name in ("initdb", "pg_ctl", "psql") if postgres_binary(name) is None]
    if missing:
        return f"{', '.join(missing)} not found: install Debian's postgresql package"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL refuses to run as root"
    return None


class PostgresCluster:
    """A throwaway PostgreSQL cluster (initdb into a temp directory) on 127.0.0.1.

    The bootstrap superuser is `postgres`; `user` is an ordinary role with a password that owns
    `database`, as a metastore's database user is. As root the server runs as the `postgres`
    user (PostgreSQL refuses root), which cannot enter pytest's private temp directories: the
    cluster then lives in a directory of its own under the system temp dir, removed when it
    stops. The server logs every DDL statement to `log`.
    """

    SUPERUSER = "postgres"

    def __init__(self, database: str = "metastore", user: str = "lakehouse") -> None:
        self.root = Path(tempfile.mkdtemp(prefix="lakehouse-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.database = database
        self.user = user
        self.password = "pw-of-the-metastore-3f9c"

    @property
    def url(self) -> str:
        """The JDBC URL of the database."""
        return f"jdbc:postgresql://{LOOPBACK}:{self.port}/{self.database}"

    def _as_owner(self, *command: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *command]
        return list(command)

    def _run(self, *command: str) -> None:
        done = subprocess.run(self._as_owner(*command), capture_output=True, text=True)
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{command[0]} failed: {done.stderr.strip()}\n{tail}")

    def psql(self, sql: str, database: str | None = None, user: str | None = None) -> str:
        """Run SQL through psql (unaligned, tuples only) and return its output."""
        done = subprocess.run(
            [
                str(postgres_binary("psql")),
                *("-h", LOOPBACK, "-p", str(self.port), "-U", user or self.user),
                *("-d", database or self.database, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PGPASSWORD": self.password},
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout

    def __enter__(self) -> PostgresCluster:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        password_file = self.root / "password"
        password_file.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(password_file, "postgres")
        try:
            self._run(
                str(postgres_binary("initdb")),
                *("-D", str(self.data), "-U", self.SUPERUSER, "--auth=scram-sha-256"),
                f"--pwfile={password_file}",
            )
            options = f"-h {LOOPBACK} -p {self.port} -k {self.root} -c log_statement=ddl"
            self._run(
                str(postgres_binary("pg_ctl")),
                *("-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"),
            )
            wait_for_port(self.port, 60, "PostgreSQL", self.log)
            self.psql(
                f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'",
                "postgres",
                self.SUPERUSER,
            )
            self.psql(
                f"CREATE DATABASE {self.database} OWNER {self.user}", "postgres", self.SUPERUSER
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                self._as_owner(
                    str(postgres_binary("pg_ctl")),
                    *("-D", str(self.data), "-m", "immediate", "-w", "stop"),
                ),
                check=False,
                capture_output=True,
            )
        shutil.rmtree(self.root, ignore_errors=True)


class SparkStandalone:
    """A standalone Spark cluster on 127.0.0.1: one master and `workers` workers of one core."""

    def __init__(self, root: Path, workers: int = 2) -> None:
        self.root = root
        self.workers = workers
        self.port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def master(self) -> str:
        """The master URL jobs are submitted to."""
        return f"spark://{LOOPBACK}:{self.port}"

    def _start(self, name: str, *arguments: str) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the process owns it
        env = {**child_env(), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_HOME": str(SPARK_HOME)}
        env["SPARK_WORKER_DIR"] = str(self.root / f"{name}-work")
        env["SPARK_DAEMON_JAVA_OPTS"] = child_jvm_options()
        process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def __enter__(self) -> SparkStandalone:
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                LOOPBACK,
                "--port",
                str(self.port),
                "--webui-port",
                str(free_port()),
            )
            wait_for_port(self.port, 120, "the Spark master", self.root / "master.log")
            for index in range(self.workers):
                self._start(
                    f"worker-{index}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    LOOPBACK,
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    self.master,
                )
            self._wait_registered(120)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_registered(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        log = self.root / "master.log"
        while time.monotonic() < deadline:
            if log.read_text(errors="replace").count("Registering worker") >= self.workers:
                return
            time.sleep(1)
        raise RuntimeError(
            f"workers did not register in {timeout:.0f} s\n{log.read_text()[-2000:]}"
        )

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for process in reversed(self.processes):
            _stop(process)


class LakehouseServer:
    """`lakehouse serve` in a child process on free ports (JDBC, Connect); stops on SIGTERM."""

    def __init__(self, cwd: Path, *arguments: str) -> None:
        self.cwd = cwd
        self.port = free_port()
        self.connect_port = free_port()
        self.arguments = arguments
        self.process: subprocess.Popen[bytes] | None = None
        self.log = cwd / f"serve-{self.port}.log"

    @property
    def url(self) -> str:
        """The JDBC URL of the endpoint."""
        return f"jdbc:hive2://{LOOPBACK}:{self.port}/default"

    @property
    def token_file(self) -> Path:
        """The token both endpoints ask for (the tests' projects have their home at .lakehouse)."""
        return self.cwd / ".lakehouse" / "serve" / "token"

    def __enter__(self) -> LakehouseServer:
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ingest.cli",
                    "serve",
                    "--port",
                    str(self.port),
                    "--connect-port",
                    str(self.connect_port),
                    *self.arguments,
                ],
                cwd=self.cwd,
                env=child_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for_port(self.port, 300, "lakehouse serve", self.log, self.process)
        return self

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Stop the server as its user would and return its exit code.

        SIGTERM goes to the process (`kill PID`, a supervisor); SIGINT goes to its whole process
        group, as Ctrl-C in its terminal sends it.
        """
        assert self.process is not None
        if signum == signal.SIGINT:
            os.killpg(self.process.pid, signal.SIGINT)
        else:
            self.process.send_signal(signum)
        return self.process.wait(60)

    def output(self) -> str:
        """What the server printed so far, stdout and stderr together."""
        return self.log.read_text(errors="replace")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.process is not None:
            _stop(self.process)


def beeline(
    server: LakehouseServer,
    statement: str,
    *,
    password: Path | Literal["token"] | None = "token",
    url_settings: str = "",
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """Run one statement through pyspark's beeline; rows come back as CSV on stdout.

    The password is the server's token (`token`), another file's text, or none (None); beeline
    reads it from the file (`-w`: not on the command line). `url_settings` goes after the URL
    (`?key=value`: session settings the server applies as the session opens).
    """
    chosen = server.token_file if password == "token" else password
    return _beeline(server, ["-e", statement], chosen, timeout, url_settings)


def beeline_script(
    server: LakehouseServer, statements: list[str], workdir: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run statements in order on one JDBC connection (one client session), going on past errors.

    Rows come back as CSV on stdout, each failure as an `Error: ...` line on stderr; beeline
    exits 0 even when statements failed (`--force`).
    """
    script = workdir / f"beeline-{time.monotonic_ns()}.sql"
    script.write_text("".join(f"{statement};\n" for statement in statements))
    return _beeline(server, ["--force=true", "-f", str(script)], server.token_file, timeout)


def _beeline(
    server: LakehouseServer,
    arguments: list[str],
    password: Path | None,
    timeout: float,
    url_settings: str = "",
) -> subprocess.CompletedProcess[str]:
    credentials = ["-n", "analyst", "-w", str(password)] if password is not None else []
    return subprocess.run(
        [
            str(SPARK_HOME / "bin" / "beeline"),
            "-u",
            server.url + url_settings,
            *credentials,
            "--silent=true",
            "--outputformat=csv2",
            "--showHeader=false",
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**child_env(), "SPARK_HOME": str(SPARK_HOME)},
        check=False,
    )
