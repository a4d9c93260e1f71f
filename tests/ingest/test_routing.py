"""One source, many tables (`route_by`): records in their route's table, the rest in the
dead-letter table with a reason, each target committing a batch once under its own marker."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from ingest.admin.replay import ReplayOptions, plan_replay, replay_batch
from ingest.config import PipelineSpec
from ingest.routing import ROUTE_BY_KEY, ROUTE_KEY, Route, Routing
from ingest.runner import run_pipeline
from ingest.sources import FileSource
from tables.delta.history import read_ledger
from tables.delta.markers import committed_batch
from tables.delta.writer import TableWriter
from tables.errors import ConfigError, InjectedFaultError, TerminalError
from tables.record_rules import RecordRules
from tables.spec import TableSpec

MakeTable = Callable[..., TableSpec]
CLICKS_DDL = "event_id STRING NOT NULL, kind STRING, page STRING"
ORDERS_DDL = "event_id STRING NOT NULL, kind STRING, amount DOUBLE"


def routed(
    tmp_path: Path, clicks: TableSpec, orders: TableSpec, name: str = "router"
) -> PipelineSpec:
    routing = Routing(
        "lower(kind)",
        (Route(clicks.name, ("click", "view")), Route(orders.name, ("order",))),
        f"{name}_unrouted_{clicks.name}",
    )
    return PipelineSpec(
        name=name,
        table=clicks.name,
        app_id=name,
        source=FileSource(str(tmp_path / "landing"), "json", max_files_per_trigger=1),
        trigger="available-now",
        checkpoint=str(tmp_path / "checkpoints" / name),
        routing=routing,
    )


def drop(landing: Path, name: str, lines: list[str]) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / name).write_text("\n".join(lines) + "\n")


def event(event_id: str, kind: object, **fields: object) -> str:
    return json.dumps({"event_id": event_id, "kind": kind, **fields})


@pytest.fixture
def tables(make_table: MakeTable) -> tuple[TableSpec, TableSpec]:
    return make_table(CLICKS_DDL), make_table(ORDERS_DDL)


def test_each_record_lands_in_its_route_table_the_rest_in_the_dead_letter_table_and_replays(
    spark: SparkSession, tables: tuple[TableSpec, TableSpec], tmp_path: Path
) -> None:
    clicks, orders = tables
    job = routed(tmp_path, clicks, orders)
    drop(
        tmp_path / "landing",
        "a.json",
        [
            event("c1", "click", page="/"),
            event("c2", "VIEW", page="/x"),
            event("o1", "order", amount=3.5),
            event("o2", "order", amount="lots"),  # an order the orders table cannot read
            event("r1", "refund", amount=1.0),  # a value no route takes
            event("n1", None),  # NULL
            '{"event_id": "broken", "kind": "click", ',  # a record nobody can read
        ],
    )

    report = run_pipeline(spark, job, [clicks, orders])
    again = run_pipeline(spark, job, [clicks, orders])

    assert [(r.table, r.status) for r in report.results] == [
        (clicks.name, "committed"),
        (orders.name, "committed"),
    ]
    assert again.results == []
    assert sorted(r.event_id for r in spark.table(clicks.name).collect()) == ["c1", "c2"]
    assert [r.event_id for r in spark.table(orders.name).collect()] == ["o1"]
    quarantined = spark.table(orders.quarantine_name).collect()
    assert len(quarantined) == 1
    assert '"o2"' in quarantined[0]["_lh_raw"]
    assert spark.table(clicks.quarantine_name).count() == 0
    dead = {
        json.loads(r["_lh_raw"]).get("event_id") if r["_lh_raw"].endswith("}") else "broken": r
        for r in spark.table(job.routing.dead_letter).collect()  # type: ignore[union-attr]
    }
    assert sorted(dead) == ["broken", "n1", "r1"]
    assert "'refund', which no route takes" in dead["r1"]["_lh_reason"]
    assert "is NULL" in dead["n1"]["_lh_reason"]
    assert dead["broken"]["_lh_reason"].startswith("not routed (lower(kind)): ")
    assert {r["_lh_batch_id"] for r in dead.values()} == {0}
    assert report.dead_letters == 3
    for spec, values in ((clicks, ["click", "view"]), (orders, ["order"])):
        (entry,) = read_ledger(spark, spec.name)
        assert entry.meta.source[ROUTE_BY_KEY] == "lower(kind)"
        assert entry.meta.source[ROUTE_KEY] == values
        assert entry.meta.app_id == job.app_id
        assert entry.meta.batch_id == 0

    # replay re-reads the batch and keeps the target's own records: a row deleted by hand
    # comes back, the other target and the dead letters are left alone
    spark.sql(f"DELETE FROM {orders.name} WHERE event_id = 'o1'")
    (plan,) = plan_replay(spark, orders, job.app_id, 0, None, job.source)
    dry = replay_batch(TableWriter(spark, orders, job.app_id), plan, ReplayOptions(dry_run=True))
    done = replay_batch(TableWriter(spark, orders, job.app_id), plan)
    assert (dry.rows_source, dry.rows_restored, dry.rows_rejected) == (1, 1, 1)
    assert done.rows_restored == 1
    assert [r.event_id for r in spark.table(orders.name).collect()] == ["o1"]
    assert spark.table(clicks.name).count() == 2


def test_a_failure_between_targets_reruns_only_the_targets_that_miss_the_batch(
    spark: SparkSession,
    tables: tuple[TableSpec, TableSpec],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clicks, orders = tables
    job = routed(tmp_path, clicks, orders)
    landing = tmp_path / "landing"
    drop(landing, "a.json", [event("c1", "click"), event("o1", "order", amount=1.0)])
    drop(landing, "b.json", [event("c2", "click"), event("o2", "order"), event("x", "ping")])
    monkeypatch.setenv("LAKEHOUSE_FAULT", "between_targets:raise@1")

    with pytest.raises(InjectedFaultError):
        run_pipeline(spark, job, [clicks, orders])
    assert committed_batch(spark, clicks.name, job.app_id) == 1
    assert committed_batch(spark, orders.name, job.app_id) == 0
    monkeypatch.delenv("LAKEHOUSE_FAULT")
    report = run_pipeline(spark, job, [clicks, orders])

    assert [(r.table, r.batch_id, r.status) for r in report.results] == [
        (clicks.name, 1, "skipped"),
        (orders.name, 1, "committed"),
    ]
    assert sorted(r.event_id for r in spark.table(clicks.name).collect()) == ["c1", "c2"]
    assert sorted(r.event_id for r in spark.table(orders.name).collect()) == ["o1", "o2"]
    assert [r["_lh_batch_id"] for r in spark.table(job.routing.dead_letter).collect()] == [1]  # type: ignore[union-attr]
    assert len(read_ledger(spark, orders.name)) == 2


def test_a_route_expression_a_target_cannot_read_stops_before_the_stream_in_one_line(
    spark: SparkSession, tables: tuple[TableSpec, TableSpec], tmp_path: Path
) -> None:
    clicks, orders = tables
    job = routed(tmp_path, clicks, orders)
    assert job.routing is not None
    bad = Routing("page", job.routing.routes, job.routing.dead_letter)  # orders has no page
    drop(tmp_path / "landing", "a.json", [event("c1", "click")])

    with pytest.raises(ConfigError) as caught:
        run_pipeline(spark, PipelineSpec(**{**job.__dict__, "routing": bad}), [clicks, orders])

    assert f"route_by 'page' cannot be evaluated on the records of table {orders.name}" in str(
        caught.value
    )
    assert "\n" not in str(caught.value)
    assert committed_batch(spark, clicks.name, job.app_id) is None


@pytest.mark.parametrize(
    ("expression", "bigger_limit", "message"),
    [
        ("CASE WHEN rand() > 0.5 THEN 'click' ELSE 'order' END", False, "is not deterministic"),
        ("uuid()", False, "is not deterministic"),
        ("lower(kind)", True, r"read records differently \(max_record_bytes"),
    ],
)
def test_a_route_that_could_send_a_record_twice_is_refused_before_the_stream(
    spark: SparkSession,
    make_table: MakeTable,
    tmp_path: Path,
    expression: str,
    bigger_limit: bool,
    message: str,
) -> None:
    """Each target reads the batch on its own: a route that is not a function of the record,
    or targets that read a record differently, could put it in two places or none."""
    clicks = make_table(CLICKS_DDL)
    rules = RecordRules(max_record_bytes=1 << 20)
    orders = make_table(ORDERS_DDL, **({"records": rules} if bigger_limit else {}))
    job = routed(tmp_path, clicks, orders)
    assert job.routing is not None
    routing = Routing(expression, job.routing.routes, job.routing.dead_letter)
    drop(tmp_path / "landing", "a.json", [event("c1", "click")])

    with pytest.raises(ConfigError, match=message) as caught:
        run_pipeline(spark, replace(job, routing=routing), [clicks, orders])

    assert "pipeline router: route_by: " in str(caught.value)
    assert committed_batch(spark, clicks.name, job.app_id) is None


def test_specs_must_be_the_pipelines_targets_in_order(
    spark: SparkSession, tables: tuple[TableSpec, TableSpec], tmp_path: Path
) -> None:
    clicks, orders = tables
    job = routed(tmp_path, clicks, orders)
    drop(tmp_path / "landing", "a.json", [event("c1", "click")])

    with pytest.raises(ValueError, match="commits into"):
        run_pipeline(spark, job, [orders, clicks])
    with pytest.raises(ValueError, match="commits into"):
        run_pipeline(spark, job, clicks)


def test_routing_refuses_duplicate_values_and_an_empty_expression() -> None:
    with pytest.raises(ValueError, match="given twice"):
        Routing("kind", (Route("a", ("x",)), Route("b", ("x",))), "dl")
    with pytest.raises(ValueError, match="route_by"):
        Routing(" ", (Route("a", ("x",)),), "dl")
    assert issubclass(ConfigError, TerminalError)


def test_a_route_reads_the_parsed_row_and_the_record_text_where_the_row_lost_a_field(
    spark: SparkSession,
) -> None:
    """A record its target could not read in full (its fields NULL) is routed by its own text; a
    column that is not in the text (a Kafka coordinate) by the parsed row."""
    schema = "event_id STRING, kind STRING, kafka_topic STRING, _lh_record STRING"
    rows = spark.createDataFrame(
        [
            ("a", "click", "t1", '{"event_id": "a", "kind": "click"}'),
            (None, None, "t1", '{"event_id": "b", "kind": "order", "amount": "lots"}'),
            ("c", "view", "t2", '{"event_id": "c", "kind": "view"}'),
        ],
        schema,
    )
    by_kind = Routing("kind", (Route("x", ("click", "order")),), "dl")
    by_topic = Routing("concat(kafka_topic, '/', kind)", (Route("x", ("t2/view",)),), "dl")
    data = StructType([f for f in rows.schema.fields if f.name != "_lh_record"])

    kinds = by_kind.routed(rows, by_kind.reads(spark, "x", data))
    topics = by_topic.routed(rows, by_topic.reads(spark, "x", data))

    assert [r["_lh_route"] for r in kinds.collect()] == ["click", "order", "view"]
    assert [r["_lh_route"] for r in topics.collect()] == ["t1/click", "t1/order", "t2/view"]
    assert kinds.columns == [*rows.columns, "_lh_route"]
    assert [f.name for f in by_topic.reads(spark, "x", data).fields] == ["kind", "kafka_topic"]
