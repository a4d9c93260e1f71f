"""The crash harness (`make verify`): its pure parts here, and one quick real run (slow).

The harness is what proves exactly-once under crashes, so its own bookkeeping (the generated
input, the ledger, the set comparison, the verdict) must be right before its verdict means
anything.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crash_matrix.__main__ import parse_args, settings_of
from crash_matrix.harness import Harness
from crash_matrix.kills import Timing, choose_kill, crash_actions, fault_cases
from crash_matrix.plan import (
    ID_PATTERN,
    STATE_FILE,
    Figures,
    Ledger,
    append_ledger,
    compare,
    plan_files,
    read_ledger_file,
    record_id,
    summary_line,
)
from crash_matrix.processes import Interrupts, group_alive, stop_stray_run
from tests.support.processes import child_env

REPO = Path(__file__).resolve().parents[1]


def test_plan_has_every_record_once_first_and_copies_only_of_earlier_valid_lines() -> None:
    files = plan_files(2_000, 250, seed=3)
    assert len(files) == 8
    firsts = [line for lines in files for line in lines if line.kind in ("valid", "malformed")]
    assert sorted(line.record_id for line in firsts) == [record_id(n) for n in range(2_000)]
    valid_texts: set[str] = set()
    for index, lines in enumerate(files):
        assert any(line.kind == "malformed" for line in lines)
        here = {line.text for line in lines if line.kind == "valid"}
        for line in lines:
            if line.kind == "repeat":
                assert line.text in here
            if line.kind == "resend":
                assert index > 0
                assert line.text in valid_texts
        valid_texts |= here
    assert any(line.kind == "resend" for lines in files for line in lines)


def test_malformed_lines_do_not_parse_but_name_their_id() -> None:
    files = plan_files(400, 400, seed=1)
    bad = [line for line in files[0] if line.kind == "malformed"]
    assert len(bad) == 2
    for line in bad:
        with pytest.raises(json.JSONDecodeError):
            json.loads(line.text)
        assert ID_PATTERN.findall(line.text) == [line.record_id]


def test_plan_is_deterministic_and_rejects_empty_sizes() -> None:
    assert plan_files(500, 100, seed=9) == plan_files(500, 100, seed=9)
    assert plan_files(500, 100, seed=9) != plan_files(500, 100, seed=10)
    assert [line.kind for line in plan_files(1, 10, seed=1)[0]] == ["valid"]
    with pytest.raises(ValueError, match="at least 1"):
        plan_files(0, 10, seed=1)


def test_ledger_round_trip(tmp_path: Path) -> None:
    files = plan_files(600, 300, seed=2)
    ledger_path = tmp_path / "ledger.csv"
    for index, lines in enumerate(files):
        append_ledger(ledger_path, f"f{index}", lines)
    ledger = read_ledger_file(ledger_path)
    malformed = {line.record_id for lines in files for line in lines if line.kind == "malformed"}
    assert ledger.malformed == malformed
    assert ledger.valid == {record_id(n) for n in range(600)} - malformed
    assert ledger.records == 600
    assert ledger.files == 2
    assert ledger.lines == sum(len(lines) for lines in files)


LEDGER = Ledger(frozenset({"r000000001", "r000000002"}), frozenset({"r000000003"}), 3, 1)
BAD = '{"event_id": "r000000003", "amount": "not-a-number"'


def test_compare_exact_match() -> None:
    found = compare(LEDGER, ["r000000001", "r000000002"], [BAD])
    assert (found.records, found.landed, found.quarantined) == (3, 2, 1)
    assert (found.duplicates, found.losses, found.misplaced, found.unidentified) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("target", "raw", "expected"),
    [
        (["r000000001", "r000000002", "r000000002"], [BAD], (1, 0, 0, 0)),
        (["r000000001", "r000000002"], [BAD, BAD], (1, 0, 0, 0)),
        (["r000000001", "r000000002", "r000000003"], [BAD], (1, 0, 0, 0)),
        (["r000000001"], [BAD], (0, 1, 0, 0)),
        (["r000000001", "r000000002"], [], (0, 1, 0, 0)),
        (["r000000001", "r000000002", "r000000009"], [BAD], (0, 0, 1, 0)),
        (["r000000001"], [BAD, '{"event_id": "r000000002"}'], (0, 0, 1, 0)),
        (["r000000001", "r000000002"], [BAD, "garbage"], (0, 0, 0, 1)),
    ],
    ids=[
        "twice-in-target",
        "twice-in-quarantine",
        "in-both",
        "lost-valid",
        "lost-malformed",
        "unknown-id",
        "valid-quarantined",
        "raw-without-id",
    ],
)
def test_compare_counts_each_kind_of_failure(
    target: list[str], raw: list[str], expected: tuple[int, int, int, int]
) -> None:
    found = compare(LEDGER, target, raw)
    assert (found.duplicates, found.losses, found.misplaced, found.unidentified) == expected


def passing_figures() -> Figures:
    return Figures(
        records=3000,
        files=10,
        point_faults=3,
        random_kills=3,
        sigterms=1,
        restarts=7,
        landed=2980,
        quarantined=20,
        marker=9,
        last_batch=9,
        checkpoint_batch=9,
        ledger_batches_ok=True,
        consumed=True,
        seconds=301.4,
    )


def test_summary_line_ok() -> None:
    figures = passing_figures()
    assert figures.ok
    assert summary_line(figures) == (
        "verify: faults=6 point_faults=3 random_kills=3 sigterms=1 restarts=7 records=3000 "
        "landed=2980 quarantined=20 duplicates=0 losses=0 misplaced=0 marker=9/9 time=301s ok"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"duplicates": 1},
        {"losses": 2},
        {"misplaced": 1},
        {"unidentified": 1},
        {"marker": 8},
        {"marker": None},
        {"checkpoint_batch": 8},
        {"ledger_batches_ok": False},
        {"consumed": False},
    ],
)
def test_summary_line_fails_on_any_bad_figure(change: dict[str, object]) -> None:
    figures = passing_figures()
    for name, value in change.items():
        setattr(figures, name, value)
    assert not figures.ok
    assert summary_line(figures).endswith(" FAILED")
    assert figures.as_json()["ok"] is False


def test_fault_cases_cover_every_point() -> None:
    assert crash_actions(("raise", "exit", "kill")) == ("kill", "exit")
    assert crash_actions(("raise", "exit", "kill", "term")) == ("kill", "term")
    points = ["mid_quarantine", "before_write", "before_commit", "after_checkpoint"]
    full = fault_cases(points, ("kill", "term"), quick=False)
    assert len(full) == 8
    assert set(full) == {(p, a) for p in points for a in ("kill", "term")}
    quick = fault_cases(points, ("kill", "term"), quick=True)
    assert quick == [
        ("mid_quarantine", "kill"),
        ("before_commit", "term"),
        ("after_checkpoint", "kill"),
    ]


def test_kills_fall_in_startup_or_in_the_batches_share() -> None:
    rng = random.Random(5)
    timing = Timing(startups=[20.0], first_batches=[10.0], batches=[4.0])
    kills = [choose_kill(rng, timing, 100, 50) for _ in range(2_000)]
    in_startup = [delay for after_write, delay in kills if not after_write]
    in_batches = [delay for after_write, delay in kills if after_write]
    assert all(5.0 <= d <= 20.0 for d in in_startup)
    assert 0.05 < len(in_startup) / len(kills) < 0.3
    assert all(0.0 <= d <= 10.0 + 4.0 * 3 for d in in_batches)
    assert max(in_batches) > 10.0 + 4.0 * 2
    late = [choose_kill(rng, timing, 2, 20) for _ in range(200)]
    in_first = [delay for after_write, delay in late if after_write]
    assert max(in_first) <= 5.0
    assert max(in_first) > 4.0
    even = [choose_kill(rng, timing, 20, 20) for _ in range(200)]
    assert max(delay for after_write, delay in even if after_write) > 8.0


def test_timing_learns_startup_first_and_later_batch_times() -> None:
    timing = Timing()
    assert (timing.startup, timing.batch, timing.first_batch) == (20.0, 5.0, 15.0)
    timing.learn(22.0, [35.0, 38.0, 41.0, 44.0])
    timing.learn(None, [40.0])
    assert timing.batch == 3.0
    assert timing.startup == 22.0
    assert timing.first_batch == 13.0
    timing.learn(20.0, [20.0, 23.0])
    timing.learn(20.0, [21.0])
    assert timing.first_batch == 13.0


def test_quick_preset_only_changes_defaults() -> None:
    quick = parse_args(["--quick", "--records", "500"])
    assert (quick.records, quick.batch_size, quick.random_kills) == (500, 200, 2)
    full = parse_args([])
    assert (full.records, full.batch_size, full.random_kills) == (100_000, 750, 200)


def test_resume_is_refused_without_a_workdir_or_with_new_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_args(["--resume", "--workdir", "w"]).resume
    for argv in (["--resume"], ["--resume", "--workdir", "w", "--records", "10"]):
        with pytest.raises(SystemExit) as stopped:
            parse_args(argv)
        assert stopped.value.code == 2
    assert "drop --records" in capsys.readouterr().err


def test_saved_harness_resumes_where_it_stopped(tmp_path: Path) -> None:
    harness = Harness(tmp_path, settings_of(parse_args(["--records", "90", "--batch-size", "30"])))
    harness.prepare()
    harness.land_through(1)
    harness.started, harness.cases_done = 3, 2
    harness.figures.point_faults, harness.figures.errors = 2, ["one"]
    harness.timing.learn(20.0, [30.0, 33.0])
    harness.rng.random()
    harness.save()
    expected_next = harness.rng.random()

    resumed = Harness.resume(tmp_path)
    assert resumed.settings == harness.settings
    assert resumed.plan == harness.plan
    assert (resumed.landed, resumed.started, resumed.cases_done) == (2, 3, 2)
    assert (resumed.figures.point_faults, resumed.figures.errors) == (2, ["one"])
    assert resumed.figures.resumes == 1
    assert resumed.timing == harness.timing
    assert resumed.rng.random() == expected_next
    assert resumed.elapsed() >= harness.elapsed() - 1.0
    resumed.land_through(2)
    assert sorted(p.name for p in (tmp_path / "landing").iterdir())[-1] == "events-000002.json"
    assert json.loads((tmp_path / STATE_FILE).read_text())["figures"]["resumes"] == 1


def test_sizes_out_of_range_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--records", "0"], ["--batch-size", "-1"], ["--run-timeout", "0"]):
        with pytest.raises(SystemExit) as stopped:
            parse_args(argv)
        assert stopped.value.code == 2
    assert "must be" in capsys.readouterr().err


def test_a_stop_inside_a_bookkeeping_step_waits_for_its_end() -> None:
    interrupts = Interrupts()
    steps: list[str] = []

    def two_nested_steps() -> None:
        with interrupts.deferred():
            with interrupts.deferred():
                interrupts.handle(15, None)
                steps.append("inner step finished")
            steps.append("outer step finished")

    with pytest.raises(KeyboardInterrupt):
        two_nested_steps()
    assert steps == ["inner step finished", "outer step finished"]
    with pytest.raises(KeyboardInterrupt):
        interrupts.handle(15, None)
    with interrupts.deferred():
        steps.append("no stop pending")


def test_resume_stops_the_run_a_stopped_harness_left_alive(tmp_path: Path) -> None:
    harness = Harness(tmp_path, settings_of(parse_args(["--records", "30", "--batch-size", "30"])))
    harness.prepare()
    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", str(tmp_path / "home")],
        start_new_session=True,
    )
    try:
        harness.running = left.pid
        harness.save()
        resumed = Harness.resume(tmp_path)
        assert left.wait(timeout=10) == -9
        assert resumed.running is None
        assert json.loads((tmp_path / STATE_FILE).read_text())["running"] is None
    finally:
        left.kill()
        left.wait()


def test_a_stray_run_is_stopped_only_if_it_is_ours(tmp_path: Path) -> None:
    code = "import time; time.sleep(120)"
    ours = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "home")], start_new_session=True
    )
    other = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        assert not stop_stray_run(other.pid, tmp_path)
        assert other.poll() is None
        assert stop_stray_run(ours.pid, tmp_path)
        assert ours.wait(timeout=10) == -9
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_quick_crash_matrix_stopped_and_resumed_lands_every_record_exactly_once(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    harness = [sys.executable, "-m", "crash_matrix", "--workdir", str(work)]
    first = subprocess.Popen(
        [*harness, "--quick"], cwd=REPO, env=child_env(), stdout=subprocess.PIPE, text=True
    )
    state = work / STATE_FILE
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and first.poll() is None:
        saved = json.loads(state.read_text()) if state.exists() else {}
        if saved.get("started", 0) >= 2 and saved.get("running"):
            break
        time.sleep(0.5)
    assert first.poll() is None, "the harness ended before its second run"
    assert saved.get("running"), "the harness never began a second run"
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 130
    stray = json.loads(state.read_text())
    assert stray["running"] is None
    assert not group_alive(saved["running"])

    result = subprocess.run(
        [*harness, "--resume", "--json", str(tmp_path / "figures.json")],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    summary = result.stdout.strip().splitlines()[-1]
    figures = dict(token.split("=", 1) for token in summary.split() if "=" in token)
    assert summary.startswith("verify: ")
    assert summary.endswith(" ok")
    assert figures["duplicates"] == "0"
    assert figures["losses"] == "0"
    assert int(figures["faults"]) > 0
    saved = json.loads((tmp_path / "figures.json").read_text())
    assert saved["ok"] is True
    assert saved["point_faults"] > 0
    assert saved["resumes"] == 1
