"""A commit's session: this thread's clone of the session, kept, carrying one commit's confs.

A clone per commit stayed alive in the JVM after each MERGE (one more SparkSession per commit),
so a thread keeps one clone per session it commits through, and a commit's confs are unset
after it: the next commit through the same clone carries only its own.
"""

from __future__ import annotations

import gc
import itertools
import shutil
import subprocess
import threading
import time
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from ingest.commit import commit_batch
from tables.delta.commits import USER_METADATA_CONF, MergeStatement, commit_session, merge_into
from tables.delta.history import history_rows
from tables.delta.ledger import CommitMetadata
from tables.delta.writer import TableWriter
from tables.engine.clones import SessionClones, session_id
from tables.engine.jvm import gateway_process
from tables.spec import TableSpec

TXN_APP_CONF = "spark.databricks.delta.write.txnAppId"
_names = itertools.count()


def meta(batch_id: int) -> CommitMetadata:
    return CommitMetadata(
        app_id="app",
        batch_id=batch_id,
        source={"kind": "test"},
        rows_read=1,
        rows_quarantined=0,
        content_hash=f"h{batch_id}",
        commit_token=f"t{batch_id}",
    )


def test_a_thread_keeps_one_clone_per_session_whichever_wrapper_it_holds(
    spark: SparkSession,
) -> None:
    wrapper = SparkSession(spark.sparkContext, spark._jsparkSession)  # as foreachBatch wraps
    other = spark.newSession()

    clones = SessionClones()

    assert wrapper is not spark
    assert session_id(wrapper) == session_id(spark)
    assert clones.for_thread(wrapper) is clones.for_thread(spark)
    assert session_id(clones.for_thread(spark)) != session_id(spark)
    assert clones.for_thread(other) is not clones.for_thread(spark)


def test_another_thread_commits_through_a_clone_of_its_own(spark: SparkSession) -> None:
    clones = SessionClones()
    seen: list[SparkSession] = []
    thread = threading.Thread(target=lambda: seen.append(clones.for_thread(spark)))
    thread.start()
    thread.join()

    assert seen[0] is not clones.for_thread(spark)


def test_a_commits_confs_stay_on_the_clone_and_are_gone_after_it(spark: SparkSession) -> None:
    with commit_session(spark, SessionClones(), meta(1), {TXN_APP_CONF: "app"}) as session:
        assert session.conf.get(USER_METADATA_CONF) == meta(1).to_json()
        assert session.conf.get(TXN_APP_CONF) == "app"
        assert spark.conf.get(USER_METADATA_CONF, None) is None

    assert session.conf.get(USER_METADATA_CONF, None) is None
    assert session.conf.get(TXN_APP_CONF, None) is None


def test_a_failed_commit_leaves_no_conf_on_the_clone(spark: SparkSession) -> None:
    try:
        with commit_session(spark, SessionClones(), meta(7), {TXN_APP_CONF: "app"}) as session:
            raise RuntimeError("the MERGE failed")
    except RuntimeError:
        pass

    assert session.conf.get(USER_METADATA_CONF, None) is None
    assert session.conf.get(TXN_APP_CONF, None) is None


def test_merges_through_the_kept_clone_read_each_source_and_carry_only_their_own_entry(
    spark: SparkSession,
) -> None:
    table = f"merged_{next(_names)}"
    spark.sql(f"CREATE TABLE {table} (k STRING, v INT) USING delta")
    clauses = ["WHEN NOT MATCHED THEN INSERT *"]

    for n in range(3):
        source = spark.createDataFrame([(f"k{n}", n)], "k string, v int")
        metrics = merge_into(
            MergeStatement(table, source, "t.k = s.k", clauses, meta(n)), SessionClones()
        )
        assert metrics is not None
        assert metrics["num_inserted_rows"] == 1
    source = spark.createDataFrame([("k9", 9)], "k string, v int")
    merge_into(MergeStatement(table, source, "t.k = s.k", clauses), SessionClones())

    assert sorted(r["k"] for r in spark.table(table).collect()) == ["k0", "k1", "k2", "k9"]
    entries = [r["userMetadata"] for r in history_rows(spark, table, None) if r["version"] > 0]
    assert entries == [None, meta(2).to_json(), meta(1).to_json(), meta(0).to_json()]
    views = [
        t.name for t in spark.catalog.listTables(spark.conf.get("spark.sql.globalTempDatabase"))
    ]
    assert not [v for v in views if v.startswith("lakehouse_merge_source_")]


def jvm_sessions(spark: SparkSession) -> int:
    """How many SparkSession objects the driver JVM holds after a full GC (jcmd's histogram)."""
    jcmd = shutil.which("jcmd")
    assert jcmd is not None, "jcmd is needed: it comes with the JDK, as javac (the guard) does"
    gc.collect()  # Python's proxies of dropped sessions release their JVM objects
    histogram = subprocess.run(
        [jcmd, str(gateway_process(spark).pid), "GC.class_histogram"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts = [
        int(line.split()[1])
        for line in histogram.splitlines()
        if line.rstrip().endswith(" org.apache.spark.sql.classic.SparkSession")
    ]
    return sum(counts)


def settled_sessions(spark: SparkSession, at_most: int, seconds: float = 30.0) -> int:
    """The JVM's session count once it is at most `at_most`, or the last one read in `seconds`.

    PySpark's gateway tells the JVM to drop an object from a worker thread (py4j's
    `finalizer_deque`), after Python has freed the proxy: on a busy machine a count read right
    after `gc.collect()` still holds sessions Python dropped (CI read 8 for at most 7). A session
    something keeps stays counted however long this waits; one only waiting for its release goes.
    """
    deadline = time.monotonic() + seconds
    count = jvm_sessions(spark)
    while count > at_most and time.monotonic() < deadline:
        time.sleep(1)
        count = jvm_sessions(spark)
    return count


@pytest.mark.slow
def test_a_run_of_merge_commits_leaves_no_session_behind_in_the_jvm(
    spark: SparkSession, make_table: Callable[..., TableSpec]
) -> None:
    """Every `table`-dedup batch is a MERGE; a clone per commit left one session per batch."""
    spec = make_table(dedup="table")
    writer = TableWriter(spark, spec, "app")  # one run's: its clones are kept

    def commit(batch_id: int) -> None:
        rows = [(f"k{batch_id}", "u", 1.0)]
        batch = spark.createDataFrame(rows, "event_id string, user_id string, amount double")
        commit_batch(writer, batch_id, batch)

    commit(0)
    before = jvm_sessions(spark)
    for batch_id in range(1, 13):
        commit(batch_id)

    assert settled_sessions(spark, at_most=before + 1) <= before + 1
    assert spark.table(spec.name).count() == 13


def test_a_change_to_the_sessions_confs_gets_a_clone_that_carries_it(spark: SparkSession) -> None:
    """Commits follow the session's confs as a fresh clone per commit did."""
    clones = SessionClones()
    kept = clones.for_thread(spark)
    assert clones.for_thread(spark) is kept
    spark.conf.set("lakehouse.test.marker", "on")
    try:
        fresh = clones.for_thread(spark)
        assert fresh is not kept
        assert fresh.conf.get("lakehouse.test.marker") == "on"
        assert clones.for_thread(spark) is fresh
    finally:
        spark.conf.unset("lakehouse.test.marker")
