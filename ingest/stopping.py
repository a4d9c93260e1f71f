"""Stopping a running ingest between batches on Ctrl-C (SIGINT) or SIGTERM.

A signal only sets a flag. The batch being committed when it arrives finishes (commit, audit,
Spark's checkpoint of it); a batch that Spark starts after it raises StopRequested before doing
anything, so Spark does not checkpoint it and the next run goes on with it, exactly once. The
driver's main thread then waits for the last batch's stream checkpoint and stops the query while
it is idle. A second signal ends the process at once (exactly-once holds after any crash; the
next run recovers). A SIGTERM that a `term` fault point sent to its own process stays fatal, as
that fault means.

`query.stop()` from the signal handler itself would interrupt the stream thread wherever it is,
possibly half-way through writing a checkpoint file; the py4j callback server would then print
tracebacks for the batch it was running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from tables.faults import is_term_injected

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_POLL_SECONDS = 0.2
_CHECKPOINT_WAIT_SECONDS = 60.0


class StopRequested(Exception):  # noqa: N818 - a request, not an error
    """Raised in a batch that Spark started after a stop was requested: it must not commit."""


def exit_code(signum: int) -> int:
    """The shell's exit status for a process ended by `signum` (130 for SIGINT, 143 for TERM)."""
    return 128 + signum


class StopRequest:
    """The stop flag a signal sets, and the lock that keeps a stop out of a running batch."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.batch_lock = threading.Lock()
        self.last_batch: int | None = None

    @property
    def requested(self) -> bool:
        """True once a stop signal has arrived."""
        return self.signum is not None

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """The signal handler: the first signal asks for a stop, a second one ends the process."""
        if signum == signal.SIGTERM and is_term_injected():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if self.signum is not None:
            os._exit(exit_code(signum))
        self.signum = signum
        quiet_py4j()

    @contextlib.contextmanager
    def batch(self, batch_id: int) -> Iterator[None]:
        """Run one batch unless a stop was requested; remember it as the last one run."""
        with self.batch_lock:
            if self.requested:
                raise StopRequested(f"batch {batch_id} not started: a stop was requested")
            yield
            self.last_batch = batch_id

    def stop_between_batches(self, query: Any, is_checkpointed: Callable[[int], bool]) -> None:
        """Stop the query once the batch under way has finished and Spark has checkpointed it."""
        with self.batch_lock:
            last = self.last_batch
        deadline = time.monotonic() + _CHECKPOINT_WAIT_SECONDS
        while last is not None and query.isActive and time.monotonic() < deadline:
            if is_checkpointed(last):
                break
            time.sleep(_POLL_SECONDS)
        with contextlib.suppress(Exception):
            query.stop()


def quiet_py4j() -> None:
    """Silence py4j's own logging: a stopping stream makes its callback server log tracebacks.

    py4j also logs a lost JVM's traceback through the root logger (`logging.exception`), which
    configures a stderr handler on first use: the root gets a handler that drops it, so the CLI
    prints its one line alone. LAKEHOUSE_DEBUG=1 keeps all of it.
    """
    if os.environ.get("LAKEHOUSE_DEBUG"):
        return
    for name in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Install the stop handlers for SIGINT and SIGTERM while the block runs (main thread only)."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {s: signal.signal(s, request.handle) for s in STOP_SIGNALS}
    try:
        yield request
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
