"""The crash harness (`make verify`): its pure parts here, and one quick real run (slow).

The harness is what proves exactly-once under crashes, so its own bookkeeping (the generated
input, the ledger, the set comparison, the verdict) must be right before its verdict means
anything.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import child_env
from verify.crash_matrix import (
    ID_PATTERN,
    Figures,
    Ledger,
    Timing,
    append_ledger,
    choose_kill,
    compare,
    crash_actions,
    fault_cases,
    parse_args,
    plan_files,
    read_ledger_file,
    record_id,
    summary_line,
)

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
    kills = [choose_kill(rng, 20.0, 4.0, 100, 50) for _ in range(2_000)]
    in_startup = [delay for after_write, delay in kills if not after_write]
    in_batches = [delay for after_write, delay in kills if after_write]
    assert all(5.0 <= d <= 20.0 for d in in_startup)
    assert 0.05 < len(in_startup) / len(kills) < 0.3
    assert all(0.0 <= d <= 4.0 * 4 for d in in_batches)
    late = [choose_kill(rng, 20.0, 4.0, 1, 50) for _ in range(200)]
    assert max(delay for after_write, delay in late if after_write) <= 4.0


def test_timing_learns_startup_and_batch_time() -> None:
    timing = Timing()
    assert (timing.startup, timing.batch) == (20.0, 5.0)
    timing.learn(22.0, [25.0, 28.0, 31.0, 34.0])
    timing.learn(None, [40.0])
    assert timing.batch == 3.0
    assert timing.startup == 22.0


def test_quick_preset_only_changes_defaults() -> None:
    quick = parse_args(["--quick", "--records", "500"])
    assert (quick.records, quick.batch_size, quick.random_kills) == (500, 200, 2)
    full = parse_args([])
    assert (full.records, full.batch_size, full.random_kills) == (100_000, 750, 200)


@pytest.mark.slow
def test_quick_crash_matrix_lands_every_record_exactly_once(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "verify.crash_matrix",
            "--quick",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(tmp_path / "figures.json"),
        ],
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
