"""The spark-submit command line of a scheduled job: `ingest/job.py` as the driver's program."""

from __future__ import annotations

from pathlib import Path

#: The Delta package a submitted driver needs (Spark resolves it with --packages).
DELTA_PACKAGE = "io.delta:delta-spark_4.1_2.13:4.4.0"


def submit_command(master: str, arguments: list[str]) -> list[str]:
    """A spark-submit command line that runs `lakehouse ARGUMENTS` as a job on `master`."""
    return [
        "spark-submit",
        "--master",
        master,
        "--packages",
        DELTA_PACKAGE,
        str(Path(__file__).with_name("job.py").resolve()),
        *arguments,
    ]
