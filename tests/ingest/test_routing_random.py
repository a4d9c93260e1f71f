"""A random routed stream checked against an independent fold: JSON files whose records go to
an append table, an upsert table or the dead-letter table, with runs cut short between targets
and writes failing before and after their commit, and files sent again."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ingest.config import PipelineSpec
from ingest.routing import Route, Routing
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.errors import InjectedFaultError
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
KINDS = ("click", "view", "CLICK", "order", "ping", None, "broken")


def _records(rng: random.Random, n: int, seq: list[int]) -> list[tuple[str, str, object]]:
    """One file: (event id, its line, its kind) per record."""
    out = []
    for _ in range(rng.randrange(4, 12)):
        kind = rng.choice(KINDS)
        seq[0] += 1
        event_id = f"{'o' if kind == 'order' else 'e'}{rng.randrange(12)}"
        body = {"event_id": event_id, "kind": kind, "seq": seq[0], "page": f"p{n}"}
        if kind == "broken":
            out.append((event_id, f'{{"event_id": "{event_id}", "kind": "click", ', kind))
        else:
            out.append((event_id, json.dumps(body), kind))
    return out


@pytest.mark.slow
@pytest.mark.evolution
@pytest.mark.parametrize(
    ("file_count", "resent"),
    [
        pytest.param(3, 1, id="4-files", marks=pytest.mark.long),  # make verify: about 90 s
        pytest.param(5, 2, id="7-files", marks=pytest.mark.long),  # make verify: about 160 s
    ],
)
def test_random_routed_stream_with_failures_matches_the_fold(
    spark: SparkSession,
    make_table: MakeTable,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    file_count: int,
    resent: int,
) -> None:
    """Files of mixed records (some sent twice) through a router whose runs are cut short
    between targets and before and after commits, run again until they finish."""
    clicks = make_table(
        "event_id STRING NOT NULL, kind STRING, seq BIGINT, page STRING", dedup="table"
    )
    orders = make_table(
        "event_id STRING NOT NULL, kind STRING, seq BIGINT, page STRING",
        merge="upsert",
        sequence_by="seq",
    )
    routing = Routing(
        "lower(kind)",
        (Route(clicks.name, ("click", "view")), Route(orders.name, ("order",))),
        f"unrouted_{clicks.name}",
    )
    landing = tmp_path / "landing"
    landing.mkdir()
    job = PipelineSpec(
        name="random_router",
        table=clicks.name,
        app_id="random_router",
        source=FileSource(str(landing), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoint"),
        routing=routing,
    )
    rng = random.Random(37)
    seq = [0]
    files = [_records(rng, n, seq) for n in range(file_count)]
    sent = [*files, *rng.sample(files, resent)]  # a file may arrive twice
    for n, part in enumerate(sent):
        (landing / f"{n:02d}.json").write_text("".join(line + "\n" for _, line, _ in part))
    monkeypatch.setenv("LAKEHOUSE_FAULT_SEED", "4")
    monkeypatch.setenv(
        "LAKEHOUSE_FAULT", "between_targets:raise%35,before_write:raise%20,after_commit:raise%20"
    )
    failures = 0
    while True:  # a run cut short is run again, as a scheduler would
        try:
            run_pipeline(spark, job, [clicks, orders])
            break
        except InjectedFaultError:
            failures += 1
    monkeypatch.delenv("LAKEHOUSE_FAULT")

    records = [r for part in sent for r in part]
    to_clicks = {i for i, _, k in records if isinstance(k, str) and k.lower() in {"click", "view"}}
    newest: dict[str, int] = {}
    for i, line, k in records:
        if k == "order":
            newest[i] = max(newest.get(i, 0), json.loads(line)["seq"])
    unrouted = [r for r in records if r[2] not in {"click", "view", "CLICK", "order"}]
    landed_clicks = spark.table(clicks.name).collect()
    assert sorted(r.event_id for r in landed_clicks) == sorted(to_clicks)  # once each
    assert {r.event_id: r.seq for r in spark.table(orders.name).collect()} == newest
    assert spark.table(routing.dead_letter).count() == len(unrouted)
    assert failures > 0
    for spec in (clicks, orders):
        assert sorted(e.meta.batch_id for e in read_ledger(spark, spec.name)) == list(
            range(len(sent))
        )
