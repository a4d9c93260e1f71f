"""A Spark Connect server for tests, started the way `lakehouse serve` starts it, always stopped.

`ingest.serve.start_connect_server` builds it: Delta, the warehouse catalog, this interpreter as
its Python workers, the home's serve token. Client sessions made here have no JVM.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.serve import ConnectServer, start_connect_server
from tables.engine.catalogs import CatalogSpec
from tables.engine.serve_token import authenticated_url, serve_token
from tables.engine.session import close_connect_session
from tables.faults import ENV_VAR
from tests.support.servers import free_port


@dataclass
class Server:
    """A running Connect server over a lakehouse home."""

    url: str
    home: Path
    process: ConnectServer

    def session(self) -> SparkSession:
        """A new client session (a server-side session of its own), closed with the server."""
        url = authenticated_url(self.url, self.process.token)
        session: SparkSession = SparkSession.builder.remote(url).create()
        atexit.register(close_connect_session, session)
        return session


@contextlib.contextmanager
def connect_server(home: Path, fault: str | None = None) -> Iterator[Server]:
    """A Connect server over `home` on a free port; its Python workers get the fault rule."""
    saved = os.environ.pop(ENV_VAR, None)
    if fault:
        os.environ[ENV_VAR] = fault
    try:
        port = free_port()
        token, _ = serve_token(home)  # as `serve` does, for the `lakehouse --remote` children
        process = start_connect_server(home, CatalogSpec(), "127.0.0.1", port, token)
    finally:
        os.environ.pop(ENV_VAR, None)
        if saved is not None:
            os.environ[ENV_VAR] = saved
    try:
        process.wait_ready("127.0.0.1", port)
        yield Server(f"sc://127.0.0.1:{port}", home, process)
    finally:
        process.stop()


def assert_own_process() -> None:
    """PySpark runs a process in classic or Connect mode, never both: refuse a mixed run."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        pytest.fail(
            "a classic Spark session runs in this process: run the Spark Connect tests on "
            "their own (`pytest -m connect`, as make test-slow does)"
        )
