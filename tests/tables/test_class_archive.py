"""The driver JVM's class archive: which start writes it, which maps it, and how it lands."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tables.engine.class_archive import (
    ARCHIVE_ENV,
    ArchivePlan,
    archive_key,
    archive_setting,
    is_enabled,
    plan_archive,
    release,
    settle_archive,
    should_remove,
    with_class_archive,
)

KEY = "k" * 20
#: A pid no process has: Linux pids stay below 2**22.
GONE = 2**22 + 1
DAY = 86400.0


def _mode_then_release(cache: Path, pid: int) -> str:
    """The mode a start with `pid` gets; its lock, if it took one, is dropped again."""
    plan = plan_archive(cache, KEY, pid=pid)
    release(plan)
    return plan.mode


def _aged(path: Path, seconds: float) -> Path:
    os.utime(path, (time.time() - seconds, time.time() - seconds))
    return path


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
    ("value", "setting"),
    [(None, "on"), ("on", "on"), (" USE ", "use"), ("use", "use"), ("off", "off"), ("no", "off")],
)
def test_the_setting_maps_and_writes_maps_only_or_does_nothing(
    value: str | None, setting: str
) -> None:
    assert archive_setting({} if value is None else {ARCHIVE_ENV: value}) == setting


def test_a_start_that_may_not_write_maps_an_archive_that_is_there_and_else_runs_without(
    tmp_path: Path,
) -> None:
    assert plan_archive(tmp_path, KEY, pid=os.getpid(), may_write=False) == ArchivePlan("none")
    assert not list(tmp_path.iterdir())  # no lock taken, nothing written
    (tmp_path / f"classes-{KEY}.jsa").write_text("classes")
    assert plan_archive(tmp_path, KEY, pid=os.getpid(), may_write=False).mode == "use"


def test_only_archives_unused_for_a_month_are_removed() -> None:
    assert should_remove(31.0)
    assert not should_remove(29.0)


def test_the_first_start_writes_the_archive_and_holds_its_lock(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.mode == "write"
    assert plan.partial is not None
    assert plan.lock is not None
    assert f"-XX:ArchiveClassesAtExit={plan.partial}" in plan.options
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"classes-{KEY}.lock"]
    # Another start meanwhile neither writes nor maps anything: the flock is held.
    assert plan_archive(tmp_path, KEY, pid=os.getpid() + 1) == ArchivePlan("none")
    release(plan)
    assert plan.lock.closed
    assert _mode_then_release(tmp_path, os.getpid() + 1) == "write"


def test_a_start_maps_an_archive_that_is_there_and_marks_it_used(tmp_path: Path) -> None:
    archive = tmp_path / f"classes-{KEY}.jsa"
    archive.write_text("classes")
    _aged(archive, DAY)
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.mode == "use"
    assert f"-XX:SharedArchiveFile={archive}" in plan.options
    assert "-XX:+VerifySharedSpaces" in plan.options
    assert time.time() - archive.stat().st_mtime < 60


def test_a_start_that_maps_the_archive_removes_a_killed_writers_late_partial(
    tmp_path: Path,
) -> None:
    (tmp_path / f"classes-{KEY}.jsa").write_text("classes")
    late = tmp_path / f"classes-{KEY}.{GONE}.partial"
    late.write_text("written by an orphaned JVM after the archive landed")
    assert plan_archive(tmp_path, KEY, pid=os.getpid()).mode == "use"
    assert not late.exists()


def test_a_cache_path_with_whitespace_gets_no_archive(tmp_path: Path) -> None:
    # Spark splits the driver's Java options on whitespace: the path would break the JVM's start.
    assert plan_archive(tmp_path / "my cache", KEY, pid=os.getpid()) == ArchivePlan("none")


def test_a_killed_writer_leaves_a_lock_file_no_one_holds_and_its_partial_is_removed(
    tmp_path: Path,
) -> None:
    (tmp_path / f"classes-{KEY}.lock").write_text("")  # the kernel dropped its flock
    left = tmp_path / f"classes-{KEY}.{GONE}.partial"
    left.write_text("half")
    assert _mode_then_release(tmp_path, os.getpid()) == "write"
    assert not left.exists()


def test_an_archive_is_moved_into_place_once_its_jvm_exits_cleanly(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan.partial is not None
    assert plan.archive is not None
    assert plan.lock is not None
    assert settle_archive(_written(plan), exit_code=0)
    assert plan.archive.read_text() == "classes"
    assert not plan.partial.exists()
    assert plan.lock.closed
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
    assert plan.lock.closed
    assert _mode_then_release(tmp_path, os.getpid()) == "write"


def test_the_lock_is_held_until_the_archive_is_settled(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert plan_archive(tmp_path, KEY, pid=os.getpid() + 1) == ArchivePlan("none")
    assert not settle_archive(plan, exit_code=1)
    assert _mode_then_release(tmp_path, os.getpid() + 1) == "write"


def test_writing_an_archive_removes_other_class_paths_day_old_partial_archives(
    tmp_path: Path,
) -> None:
    old, recent = tmp_path / f"classes-other.{GONE}.partial", tmp_path / "classes-b.1.partial"
    for partial in (old, recent):
        partial.write_text("half")
    _aged(old, 2 * DAY)
    plan = plan_archive(tmp_path, KEY, pid=os.getpid())
    assert settle_archive(_written(plan), exit_code=0)
    assert not old.exists()
    assert recent.exists()


def test_writing_an_archive_removes_other_class_paths_unused_for_a_month(
    tmp_path: Path,
) -> None:
    old, recent = tmp_path / "classes-old.jsa", tmp_path / "classes-recent.jsa"
    for archive, days in ((old, 40), (recent, 3)):
        archive.write_text("classes")
        _aged(archive, days * DAY)
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
