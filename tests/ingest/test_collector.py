"""The cycle collector between batches: what it frees, how often it runs, when it freezes.

Each test sets the process's collector state it needs (frozen or not, automatic passes off) and
puts it back, so it holds whatever ran before it in this pytest process.
"""

from __future__ import annotations

import gc
import json
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from ingest.cli.commands import app, main
from ingest.commit.batch_result import BatchResult
from ingest.observe.collector import UNFROZEN_EVERY, CycleCollector, should_collect
from tables.engine.jvm import gateway


def settled(batch_id: int = 0) -> BatchResult:
    return BatchResult(table="events", app_id="landing", batch_id=batch_id, status="committed")


class _Proxy:
    """A stand-in for py4j's JavaObject and its JavaMember: each holds the other."""

    def __init__(self) -> None:
        self.member = {"container": self}


def dropped_cycle() -> weakref.ref[_Proxy]:
    proxy = _Proxy()
    gone = weakref.ref(proxy)
    del proxy
    assert gone() is not None  # refcounts cannot free a cycle
    return gone


@pytest.fixture
def manual_gc() -> Iterator[None]:
    """No automatic pass (it could free a cycle first) and nothing frozen; restored after."""
    enabled = gc.isenabled()
    gc.disable()
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def test_a_frozen_run_collects_after_every_batch_an_unfrozen_one_every_tenth() -> None:
    assert [should_collect(n, frozen=True) for n in range(3)] == [True, True, True]
    unfrozen = [n for n in range(3 * UNFROZEN_EVERY) if should_collect(n, frozen=False)]
    assert unfrozen == [0, UNFROZEN_EVERY, 2 * UNFROZEN_EVERY]


@pytest.mark.usefixtures("manual_gc")
def test_a_collector_that_may_not_freeze_frees_cycles_every_tenth_batch_and_freezes_nothing() -> (
    None
):
    collector = CycleCollector()
    first = dropped_cycle()
    collector.settled(settled(0))
    assert first() is None
    later = dropped_cycle()
    for batch in range(1, UNFROZEN_EVERY):
        collector.settled(settled(batch))
    assert later() is not None  # batches 1-9 pay no pass
    collector.settled(settled(UNFROZEN_EVERY))
    assert later() is None
    assert (collector.collections, collector.frozen, gc.get_freeze_count()) == (2, False, 0)


@pytest.mark.usefixtures("manual_gc")
def test_the_console_scripts_collector_freezes_once_then_frees_each_batchs_cycles() -> None:
    collector = CycleCollector(owns_process=True)
    collector.settled(settled(0))
    frozen = gc.get_freeze_count()
    assert collector.frozen
    assert frozen > 0
    gone = dropped_cycle()
    collector.settled(settled(1))
    assert gone() is None
    assert collector.collections == 2
    assert gc.get_freeze_count() <= frozen  # no second freeze (frozen objects may still die)
    # A second run in the same process finds it frozen: it adds nothing and collects as unfrozen.
    again = CycleCollector(owns_process=True)
    again.settled(settled(0))
    assert not again.frozen
    assert gc.get_freeze_count() <= frozen


@pytest.mark.usefixtures("manual_gc")
def test_a_py4j_proxy_whose_method_ran_waits_for_the_cycle_collector(spark: SparkSession) -> None:
    """py4j's proxy and its method object hold each other: the JVM object stays bound until
    Python's cycle collector runs, which `CycleCollector` does between batches."""
    proxy = gateway(spark, "a JVM object for the test").java.util.ArrayList()
    assert proxy.size() == 0
    gone = weakref.ref(proxy)
    del proxy
    assert gone() is not None
    CycleCollector().settled(settled())
    assert gone() is None


CONFIG = """
[lakehouse]
home = "state"

[tables.collected]
schema = "event_id STRING NOT NULL"
keys = ["event_id"]

[pipelines.collected]
table = "collected"
[pipelines.collected.source]
format = "json"
path = "landing"
"""


def project(root: Path, batch: int) -> Path:
    (root / "lakehouse.toml").write_text(CONFIG)
    (root / "landing").mkdir(exist_ok=True)
    (root / "landing" / f"{batch}.json").write_text(json.dumps({"event_id": f"e{batch}"}) + "\n")
    return root / "lakehouse.toml"


@pytest.mark.usefixtures("manual_gc", "spark")
def test_only_the_console_script_freezes_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest through `CliRunner` (another process's CLI) leaves the process unfrozen; the
    console script's `main()`, whose process it is, freezes it after its first batch."""
    config = project(tmp_path, 0)
    result = CliRunner().invoke(app, ["ingest", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "1 committed" in result.stdout
    assert gc.get_freeze_count() == 0

    project(tmp_path, 1)
    monkeypatch.setattr(sys, "argv", ["lakehouse", "ingest", "--config", str(config)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code in (0, None)
    assert gc.get_freeze_count() > 0
