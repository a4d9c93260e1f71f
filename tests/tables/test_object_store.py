"""The conditional log store on a local S3-API server: one winner per commit file, always.

Eight JVMs race to write the same `N.json` for 200 rounds through
`lakehouse.ConditionalS3ALogStore`: each round has exactly one winner, every other racer hears
`FileAlreadyExistsException` (Delta's signal to retry at the next version), and each object
holds its winner's content, never a later racer's. An ambiguous PUT is settled by the write id
the object carries, both ways: a PUT that landed before its connection dropped is a success,
and one that was never sent is `CommitNotWrittenException`, with no object left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tables.engine.java_classes import compiled_jar
from tables.engine.object_store import object_store_jars
from tests.support.s3_server import S3Server, start_s3_server

pytestmark = [pytest.mark.slow, pytest.mark.object_store]

RACERS = 8
ROUNDS = 200
DRIVERS = Path(__file__).resolve().parents[1] / "support" / "java"
LOG_VERSIONS = 1_300  # json and crc per version, a checkpoint every 10: 2,730 keys, 3 pages


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with start_s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="module")
def classpath() -> str:
    jars = object_store_jars()
    drivers = [DRIVERS / "LogStoreRace.java", DRIVERS / "LogStoreListing.java"]
    driver = compiled_jar("lakehouse-test-race", drivers, jars)
    spark_jars = Path(pyspark.__file__).parent / "jars" / "*"
    return os.pathsep.join([str(driver), *map(str, jars), str(spark_jars)])


def race(
    s3: S3Server, classpath: str, log: str, racers: int, rounds: int, fault: str | None = None
) -> dict[str, list[str]]:
    """Start `racers` JVMs on `log` at one moment; each racer's outcome per round."""
    start = int(time.time() * 1000) + 4000  # every JVM is up by then
    interval = 60
    env = {**os.environ, **s3.credentials()}
    processes = {
        f"r{n}": subprocess.Popen(
            [
                "java",
                f"-Dendpoint={s3.endpoint}",
                "-Dlog4j2.level=ERROR",
                "-cp",
                classpath,
                "LogStoreRace",
                log,
                f"r{n}",
                str(rounds),
                str(start),
                str(interval),
                *([fault] if fault else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        for n in range(racers)
    }
    outcomes = {}
    for name, process in processes.items():
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f"{name} exited {process.returncode}"
        outcomes[name] = [line.split(" ", 1)[1] for line in out.splitlines()]
    return outcomes


def test_eight_writers_racing_for_each_commit_file_leave_one_winner_and_no_overwrite(
    s3: S3Server, classpath: str
) -> None:
    log = f"{s3.bucket('race')}/table/_delta_log"

    outcomes = race(s3, classpath, log, RACERS, ROUNDS)

    for round_ in range(ROUNDS):
        heard = {name: said[round_] for name, said in outcomes.items()}
        winners = [name for name, outcome in heard.items() if outcome == "WIN"]
        assert len(winners) == 1, f"round {round_}: {heard}"
        assert Counter(heard.values()) == {"WIN": 1, "TAKEN": RACERS - 1}, f"round {round_}"
        stored = s3.root / "data" / "race" / "table" / "_delta_log" / f"{round_:020d}.json"
        assert json.loads(stored.read_text()) == {"racer": winners[0], "round": round_}
    assert len(s3.objects("race", "table/_delta_log")) == ROUNDS


def test_an_ambiguous_put_is_settled_by_the_write_id_both_ways(
    s3: S3Server, classpath: str
) -> None:
    bucket = s3.bucket("ambiguous")

    landed = race(s3, classpath, f"{bucket}/landed/_delta_log", 1, 5, "lost-response")
    assert landed == {"r0": ["WIN"] * 5}  # the PUT landed, then the call failed: a success
    assert len(s3.objects("ambiguous", "landed/_delta_log")) == 5

    lost = race(s3, classpath, f"{bucket}/lost/_delta_log", 1, 5, "not-sent")
    assert lost == {"r0": ["NOT_WRITTEN"] * 5}  # nothing landed: the commit failed, retry safe
    assert s3.objects("ambiguous", "lost/_delta_log") == []

    # A version another writer holds stays theirs, whatever our PUT's fate was.
    taken = race(s3, classpath, f"{bucket}/landed/_delta_log", 1, 5, "lost-response")
    assert taken == {"r0": ["TAKEN"] * 5}


def test_a_long_log_is_listed_from_its_checkpoint_in_one_request_with_the_same_files(
    s3: S3Server, classpath: str
) -> None:
    """Delta lists a log from its last checkpoint at every snapshot update; S3A's plain listing
    pages through every key of `_delta_log` (1,000 a request), so a long stream's listing grows
    with its log. Sessions turn on Delta's fast listing (`delta.enableFastS3AListFrom`: a start
    key), which must return exactly what the full listing returns."""
    bucket = s3.bucket("listing")
    log = s3.root / "data" / "listing" / "table" / "_delta_log"
    log.mkdir(parents=True)
    for version in range(LOG_VERSIONS):
        (log / f"{version:020d}.json").write_text("{}" * (version % 7 + 1))
        (log / f"{version:020d}.crc").write_text("{}")
        if version % 10 == 0:
            (log / f"{version:020d}.checkpoint.parquet").write_bytes(b"x" * version)
    (log / "_last_checkpoint").write_text("{}")
    starts = [
        f"{0:020d}.json",
        f"{LOG_VERSIONS - 10:020d}.checkpoint.parquet",
        f"{LOG_VERSIONS - 1:020d}.json",
        f"{LOG_VERSIONS:020d}.json",
    ]

    def listed(mode: str) -> dict[str, tuple[int, str]]:
        done = subprocess.run(
            [
                "java",
                f"-Dendpoint={s3.endpoint}",
                "-Dlog4j2.level=ERROR",
                "-cp",
                classpath,
                "LogStoreListing",
                f"{bucket}/table/_delta_log",
                mode,
                *starts,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, **s3.credentials()},
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        found = {}
        for line in done.stdout.splitlines():
            start, requests, names = [*line.split(" ", 2), ""][:3]
            found[start] = (int(requests), names)
        return found

    fast, full = listed("fast"), listed("full")

    assert {start: names for start, (_, names) in fast.items()} == {
        start: names for start, (_, names) in full.items()
    }
    everything = fast[starts[0]][1].split(",")
    # all but version 0's checkpoint and crc (their names sort before its json), and the pointer
    assert len(everything) == LOG_VERSIONS * 2 + LOG_VERSIONS // 10 - 2 + 1
    tail = fast[starts[1]][1].split(",")
    assert tail[0] == f"{LOG_VERSIONS - 10:020d}.checkpoint.parquet:{LOG_VERSIONS - 10}"
    # the checkpoint, 10 versions' json and crc, _last_checkpoint
    assert len(tail) == 1 + 2 * 10 + 1
    assert fast[starts[3]][1] == "_last_checkpoint:2"
    requests = {
        mode: [found[start][0] for start in starts]
        for mode, found in (("fast", fast), ("full", full))
    }
    # Every page of the log (1,000 keys a page), each time; from a late start, the directory's
    # existence check and one page.
    assert min(requests["full"]) >= 3, requests
    assert requests["fast"][1:] == [2, 2, 2], requests
