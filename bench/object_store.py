"""Tables on S3 against tables on the local disk: a stream batch's commit, and its S3 requests.

A session's warehouse is fixed when its JVM starts, so each side runs in a child process of its
own (`python bench/object_store.py SIDE HOME ...`), the two taking turns: local, S3, local, S3.
The S3 side commits to a local S3-API server (s3proxy, as the slow tier starts it) through the
project's conditional log store. Each child runs a warm-up round of stream batches (commit,
audit, outcomes, as `stream_rounds` does), then a measured round, and prints JSON: the median
commit seconds and, on S3, S3A's request counters over the measured round per batch.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from report import Report
from workloads import SCHEMA, stream_rounds

from tables.delta.provision import ensure_table
from tables.delta.warehouse import table_location, warehouse_dir
from tables.engine.catalogs import CatalogSpec
from tables.engine.jvm.files import request_counts
from tables.engine.object_store import StorageSpec
from tables.engine.session import get_spark
from tables.spec import TableSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support
from tests.support.s3_server import start_s3_server

BUCKET = "bench"
#: What a committed batch may cost in S3 requests (issue 34's goal).
REQUESTS_GOAL = 25
#: S3A's count of every request it made of the store.
TOTAL = "store_io_request"
#: S3A's counters that each count one kind of request once (their sum is `TOTAL`).
BY_KIND = frozenset(
    {
        "action_http_get_request",
        "action_http_head_request",
        "object_list_request",
        "object_put_request",
        "object_delete_request",
        "object_bulk_delete_request",
        "object_copy_requests",
        "object_multipart_initiated",
    }
)


def measure_object_store(report: Report, rows: int, per_round: int, turns: int = 2) -> None:
    """Record `s3_commit_vs_local_commit` and the S3 requests per committed batch."""
    sides: dict[str, list[dict[str, Any]]] = {"local": [], "s3": []}
    with (
        tempfile.TemporaryDirectory(prefix="lakehouse-bench-s3-") as work,
        start_s3_server(Path(work) / "store") as s3,
    ):
        s3.bucket(BUCKET)
        env = {**os.environ, **s3.credentials(), "BENCH_S3_ENDPOINT": s3.endpoint}
        for turn in range(turns):
            for side in sides:
                home = Path(work) / f"{side}-{turn}"
                sides[side].append(_child(side, home, rows, per_round, env))
    local = statistics.median(r["commit_seconds"] for r in sides["local"])
    remote = statistics.median(r["commit_seconds"] for r in sides["s3"])
    report.ratio("s3_commit_vs_local_commit", remote, local, "<= 3.0")
    requests = [r["requests_per_batch"] for r in sides["s3"]]
    # S3A counts each request once in `store_io_request` and again by kind (HEAD twice)
    per_batch = statistics.median(counts.get(TOTAL, 0.0) for counts in requests)
    report.note(f"s3_requests_per_committed_batch (goal <= {REQUESTS_GOAL})", round(per_batch, 1))
    report.note(
        "s3 requests per committed batch, by kind (the last turn)",
        {k: round(v, 1) for k, v in sorted(requests[-1].items()) if v and k in BY_KIND},
    )
    report.note(
        "seconds per commit: local disk, local S3-API server", [round(local, 3), round(remote, 3)]
    )


def _child(side: str, home: Path, rows: int, per_round: int, env: dict[str, str]) -> Any:
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), side, str(home), str(rows), str(per_round)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"object-store bench ({side}) failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_side(side: str, home: Path, rows: int, per_round: int) -> dict[str, Any]:
    """One child's rounds: a warm-up round, then the measured one."""
    catalog = None
    if side == "s3":
        storage = StorageSpec(
            endpoint=os.environ["BENCH_S3_ENDPOINT"], region="us-east-1", path_style=True
        )
        catalog = CatalogSpec(warehouse=f"s3a://{BUCKET}/{home.name}", storage=storage)
    spark = get_spark(home, app_name=f"lakehouse-bench-{side}", catalog=catalog)
    spec = TableSpec("bench_store", SCHEMA, ("event_id",))
    ensure_table(spark, spec)
    location = table_location(warehouse_dir(spark), spec.name)
    parts: dict[str, list[float]] = {"commit": [], "audit": [], "append of outcomes": []}
    rounds = stream_rounds(spark, spec, rows, per_round, parts, [])
    rounds(0)
    before = request_counts(spark, location) if side == "s3" else {}
    rounds(1)
    after = request_counts(spark, location) if side == "s3" else {}
    requests = {
        name: (after[name] - before.get(name, 0)) / per_round
        for name in after
        if name.endswith(("_request", "_requests"))
    }
    return {
        "commit_seconds": statistics.median(parts["commit"][per_round:]),
        "requests_per_batch": requests,
    }


if __name__ == "__main__":
    side_, home_, rows_, per_round_ = sys.argv[1:5]
    print(json.dumps(run_side(side_, Path(home_), int(rows_), int(per_round_))))
