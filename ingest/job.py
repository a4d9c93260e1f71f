"""The entry of scheduled jobs that bring their own Spark: spark-submit and Databricks wheel tasks.

Both run the `lakehouse` CLI on the session the scheduler provides, with the same arguments
(`ingest events -c lakehouse.toml`). Under spark-submit, `tables.engine.session.get_spark` builds
the submitted driver's session with the config's home, catalog and warehouse, so every run of the
job finds the tables the previous one created, and `lakehouse status` finds them too. On
Databricks the workspace's session and catalog are used as they are.

spark-submit takes this file's path: `lakehouse job-script` prints it with a full command line
(`ingest.submit`).
"""

from __future__ import annotations

import sys
from pathlib import Path


def script_path() -> Path:
    """This file, which spark-submit runs as the driver's Python program."""
    return Path(__file__).resolve()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with `argv` (the job's parameters) and return its exit code."""
    # Imported here, after `__main__` below has taken this file's directory off sys.path.
    from ingest.cli.commands import app

    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="lakehouse-job")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    # spark-submit puts this file's directory first on sys.path; its modules are not top-level.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != script_path().parent]
    sys.exit(main())
