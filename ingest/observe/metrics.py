"""Prometheus metrics of an ingest run, served on 127.0.0.1 with prometheus-client.

`lakehouse ingest --metrics-port PORT` serves, for its table and app id: batches by status,
rows by fate, the batch duration, the last committed batch id, and the rows its quarantine table
holds. The registry is the run's own (not the process-wide default), so two runs in one process,
as tests do, do not share counters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ingest.observe.observer import RunObserver
from tables.errors import ConfigError

if TYPE_CHECKING:
    from ingest.commit.batch_result import BatchResult

METRICS_HOST = "127.0.0.1"
#: Seconds: a micro-batch takes from a fraction of a second to minutes.
DURATION_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
ROW_FATES = (
    "inserted",
    "already_present",
    "updated",
    "deleted",
    "ignored_older",
    "duplicate_in_batch",
    "quarantined",
)


class BatchMetrics(RunObserver):
    """The metrics of one app id's batches into one table, in a registry of their own."""

    def __init__(self, table: str, app_id: str) -> None:
        self.table = table
        self.app_id = app_id
        self.registry = CollectorRegistry()
        labels = ("table", "app_id")
        self.batches = Counter(
            "lakehouse_batches",
            "Stream batches by status (committed, skipped, empty, failed).",
            (*labels, "status"),
            registry=self.registry,
        )
        self.rows_read = Counter(
            "lakehouse_rows_read",
            "Rows the committed batches read.",
            labels,
            registry=self.registry,
        )
        self.rows = Counter(
            "lakehouse_rows",
            "Rows of committed batches by fate (inserted, already_present, updated, deleted, "
            "ignored_older, duplicate_in_batch, quarantined).",
            (*labels, "fate"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "lakehouse_batch_duration_seconds",
            "Seconds from a batch's start to its settled audit (commit, audit, outcomes).",
            labels,
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.last_batch = Gauge(
            "lakehouse_last_committed_batch",
            "The last batch id the app committed (its marker), as this run saw it.",
            labels,
            registry=self.registry,
        )
        self.quarantined = Gauge(
            "lakehouse_quarantine_rows",
            "Rows of the app in the quarantine table: counted at the start, plus each batch's.",
            labels,
            registry=self.registry,
        )
        for status in ("committed", "skipped", "empty", "failed"):
            self.batches.labels(table, app_id, status)
        for fate in ROW_FATES:
            self.rows.labels(table, app_id, fate)

    def start(self, last_batch: int | None, quarantined: int) -> None:
        """Set the gauges from the table as the run finds it."""
        if last_batch is not None:
            self.last_batch.labels(self.table, self.app_id).set(last_batch)
        self.quarantined.labels(self.table, self.app_id).set(quarantined)

    def settled(self, result: BatchResult) -> None:
        """Count a settled batch."""
        labels = (self.table, self.app_id)
        self.batches.labels(*labels, result.status).inc()
        if "batch" in result.timings:
            self.duration.labels(*labels).observe(result.timings["batch"])
        if result.status == "skipped":
            return
        self.rows_read.labels(*labels).inc(result.rows_read)
        for fate in ROW_FATES:
            self.rows.labels(*labels, fate).inc(getattr(result, f"rows_{fate}"))
        self.last_batch.labels(*labels).set(result.batch_id)
        self.quarantined.labels(*labels).inc(result.rows_quarantined)

    def failed(self, batch_id: int, error: BaseException) -> None:
        """Count a failed batch."""
        self.batches.labels(self.table, self.app_id, "failed").inc()


@contextmanager
def serving(metrics: BatchMetrics, port: int) -> Iterator[str]:
    """Serve `metrics` over HTTP on 127.0.0.1:`port` while the block runs; yields the URL."""
    try:
        server, thread = start_http_server(port, addr=METRICS_HOST, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(
            f"--metrics-port {port}: cannot listen on {METRICS_HOST}:{port} ({exc.strerror}); "
            "pass another port"
        ) from exc
    try:
        yield f"http://{METRICS_HOST}:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
