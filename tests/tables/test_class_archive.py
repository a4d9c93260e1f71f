"""The driver JVM's class archive: which start writes it, which maps it, and how it lands."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tables.class_archive import (
    ARCHIVE_ENV,
    ArchivePlan,
    archive_key,
    is_enabled,
    is_lock_stale,
    plan_archive,
    release,
    settle_archive,
    should_remove,
    with_class_archive,
)

KEY = "k" * 20
#: A pid no process has: Linux pids stay below 2**22.
GONE = 2**22 + 1


def _written(plan: ArchivePlan) -> ArchivePlan:
    """The plan after its JVM wrote the archive under its own name, as it does at its exit."""
    assert plan.partial is not None
    plan.partial.write_text("classes")
    return plan


def test_the_key_changes_with_java_any_jar_or_the_java_options() -> None:
    base = archive_key("JAVA_VERSION=17", ["a.jar:10:1", "b.jar:20:2"], "-Dx=1")
    assert base == archive_key("JAVA_VERSION=17", ["a.jar:10:1", "b.jar:20:2"], "-Dx=1")
    assert base != archive_key("JAVA_VERSION=21", ["a.jar:10:1", "b.jar:20:2"], "-Dx=1")
    assert base != archive_key("JAVA_VERSION=17", ["a.jar:10:1", "b.jar:20:3"], "-Dx=1")
    assert base != archive_key("JAVA_VERSION=17", ["a.jar:10:1"], "-Dx=1")
    assert base != archive_key("JAVA_VERSION=17", ["a.jar:10:1", "b.jar:20:2"], "-Dx=2")


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, True), ("on", True), ("off", False), ("0", False), ("false", False), (" OFF ", False)],
)
def test_the_archive_is_on_unless_turned_off(value: str | None, enabled: bool) -> None:
    assert is_enabled({} if value is None else {ARCHIVE_ENV: value}) is enabled


@pytest.mark.parametrize(
    ("alive", "ours", "age", "stale"),
    [
        (True, False, 60.0, False),
        (False, False, 60.0, True),
        (True, True, 60.0, True),
        (True, False, 2 * 86400.0, True),
    ],
    ids=["writing", "writer-gone", "left-by-an-earlier-run-with-our-pid", "a-day-old"],
)
def test_a_lock_is_stale_when_its_writer_is_gone_or_its_pid_cannot_be_the_writer(
    alive: bool, ours: bool, age: float, stale: bool
) -> None:
    assert is_lock_stale(alive, ours, age) is stale


def test_only_archives_unused_for_a_month_are_removed() -> None:
    assert should_remove(31.0)
    assert not should_remove(29.0)


def test_the_first_start_writes_the_archive_and_holds_its_lock(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.mode == "write"
    assert plan.partial is not None
    assert plan.lock is not None
    assert f"-XX:ArchiveClassesAtExit={plan.partial}" in plan.options
    assert plan.lock.read_text() == str(os.getpid())
    assert sorted(p.name for p in tmp_path.iterdir()) == [plan.lock.name]
    # Another start meanwhile neither writes nor maps anything.
    assert plan_archive(tmp_path, KEY, pid=os.getpid() + 1) == ArchivePlan("none")
    release(plan)
    assert not plan.lock.exists()


def test_a_start_maps_an_archive_that_is_there_and_marks_it_used(tmp_path: Path) -> None:
    archive = tmp_path / f"classes-{KEY}.jsa"
    archive.write_text("classes")
    os.utime(archive, (time.time() - 86400, time.time() - 86400))
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.mode == "use"
    assert f"-XX:SharedArchiveFile={archive}" in plan.options
    assert "-XX:+VerifySharedSpaces" in plan.options
    assert time.time() - archive.stat().st_mtime < 60


def test_a_cache_path_with_whitespace_gets_no_archive(tmp_path: Path) -> None:
    # Spark splits the driver's Java options on whitespace: the path would break the JVM's start.
    assert plan_archive(tmp_path / "my cache", KEY, pid=os.getpid()) == ArchivePlan("none")


def test_a_lock_left_by_a_killed_writer_is_cleared_with_its_partial_archive(
    tmp_path: Path,
) -> None:
    (tmp_path / f"classes-{KEY}.lock").write_text(str(GONE))
    left = tmp_path / f"classes-{KEY}.{GONE}.partial"
    left.write_text("half")
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.mode == "write"
    assert not left.exists()


def test_an_archive_is_moved_into_place_once_its_jvm_exits_cleanly(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.partial is not None
    assert plan.archive is not None
    assert plan.lock is not None
    assert settle_archive(_written(plan), exit_code=0)
    assert plan.archive.read_text() == "classes"
    assert not plan.partial.exists()
    assert not plan.lock.exists()
    assert plan_archive(tmp_path, KEY, pid=os.getpid()).mode == "use"


@pytest.mark.parametrize("exit_code", [1, None], ids=["failed", "outlasted-the-wait"])
def test_a_jvm_that_fails_leaves_no_archive_and_the_next_start_writes_one(
    tmp_path: Path, exit_code: int | None
) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.partial is not None
    assert plan.archive is not None
    assert plan.lock is not None
    assert not settle_archive(_written(plan), exit_code)
    assert not plan.archive.exists()
    assert not plan.partial.exists()
    assert not plan.lock.exists()
    assert plan_archive(tmp_path, KEY, pid=os.getpid()).mode == "write"


def test_a_writer_leaves_the_lock_a_later_writer_took_over(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, KEY, pid=GONE)  # as if this writer's pid were gone
    assert plan.lock is not None
    taker = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert taker.mode == "write"
    assert not settle_archive(plan, exit_code=1)
    assert plan.lock.read_text() == str(os.getpid())
    release(taker)
    assert not plan.lock.exists()


def test_writing_an_archive_removes_partial_archives_of_writers_that_are_gone(
    tmp_path: Path,
) -> None:
    gone = tmp_path / f"classes-other.{GONE}.partial"
    alive = tmp_path / f"classes-other.{os.getppid()}.partial"
    for partial in (gone, alive):
        partial.write_text("half")
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert settle_archive(_written(plan), exit_code=0)
    assert not gone.exists()
    assert alive.exists()


def test_writing_an_archive_removes_other_class_paths_unused_for_a_month(
    tmp_path: Path,
) -> None:
    old, recent = tmp_path / "classes-old.jsa", tmp_path / "classes-recent.jsa"
    for archive, days in ((old, 40), (recent, 3)):
        archive.write_text("classes")
        os.utime(archive, (time.time() - days * 86400, time.time() - days * 86400))
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.partial is not None
    assert settle_archive(_written(plan), exit_code=0)
    assert not old.exists()
    assert recent.exists()


def test_the_session_conf_keeps_its_java_options_and_adds_the_archive(tmp_path: Path) -> None:
    conf = {"spark.driver.extraJavaOptions": "-Dlog4j.configurationFile=x", "spark.jars": ""}
    added, plan = with_class_archive(conf, {"PATH": os.environ.get("PATH", "")}, tmp_path)
    options = added["spark.driver.extraJavaOptions"].split()
    assert options[0] == "-Dlog4j.configurationFile=x"
    assert plan.mode == "write"
    assert f"-XX:ArchiveClassesAtExit={plan.partial}" in options
    release(plan)
    kept, off = with_class_archive(conf, {ARCHIVE_ENV: "off"}, tmp_path)
    assert off.mode == "none"
    assert kept == conf


def test_a_jvm_that_exits_cleanly_without_an_archive_is_not_asked_again_that_day(
    tmp_path: Path,
) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert not settle_archive(plan, exit_code=0)
    assert plan_archive(tmp_path, KEY, pid=os.getpid()) == ArchivePlan("none")


def test_a_cache_that_cannot_be_written_starts_without_an_archive(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    conf = {"spark.driver.extraJavaOptions": "-Dx=1"}
    kept, plan = with_class_archive(conf, {"PATH": os.environ.get("PATH", "")}, blocked / "cache")
    assert plan.mode == "none"
    assert kept == conf
