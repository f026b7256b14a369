"""``bench/side_by_side.py``: two commits' replays side by side. What it
compares between runs leaves out only what moves with time, and a run
against the checkout's own HEAD says the answers are the same and leaves no
worktree behind (no database)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "side_by_side.py"

_spec = importlib.util.spec_from_file_location("side_by_side", TOOL)
assert _spec is not None and _spec.loader is not None
side_by_side = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(side_by_side)

RUN = """engine: compiled with mypyc (28 modules)
  generated     2,000     0.1 s  RSS 50 MiB
generation 0.1 s, RSS 50 MiB (500 bytes a workload)
workloads 2,000; generation 0.1 s; replay {replay} s (set-up 0.0 s, run 0.3 s)
  replay  50.0%  1,000/2,000 finished  sim day   1.0  1,000 admissions  0.2 s  RSS 51 MiB
admissions {admissions} ({rate}/s), cycles 9,000, preemptions 0 {{}}, livelocks 0
nominations {nominations} (interactive-dev 900)
memory: baseline 43 MiB, after generation 50 MiB, after replay 51 MiB, peak (ru_maxrss) 51 MiB
interactive-dev      1,000     1,000         0 s        10 s        2 s         0
"""


def test_what_moves_with_time_is_left_out_and_the_answers_are_not() -> None:
    first = RUN.format(replay="0.4", admissions="2,000", rate="5,000", nominations="2,100")
    slower = RUN.format(replay="0.9", admissions="2,000", rate="2,222", nominations="2,100")
    assert side_by_side.answers(first) == side_by_side.answers(slower)
    fewer = RUN.format(replay="0.4", admissions="1,999", rate="5,000", nominations="2,100")
    assert side_by_side.answers(first) != side_by_side.answers(fewer)
    asked = RUN.format(replay="0.4", admissions="2,000", rate="5,000", nominations="1,900")
    assert side_by_side.answers(first) != side_by_side.answers(asked)
    assert side_by_side.replay_seconds(slower) == 0.9
    assert any(line.startswith("interactive-dev") for line in side_by_side.answers(first))


def test_a_baseline_run_that_read_zero_seconds_is_not_divided_by() -> None:
    line = side_by_side.ratio_line([(0.2, 0.1), (0.3, 0.2), (0.1, 0.0), (0.2, 0.1)])
    assert line.startswith("working tree / baseline: not worked out, a baseline run read 0.0 s")
    assert "replay more --workloads" in line
    line = side_by_side.ratio_line([(0.3, 0.2), (0.2, 0.1), (1.0, 1.0)])
    assert line == (
        "working tree / baseline, each run against its partner on the same core: "
        "median 1.500 (1.000, 1.500, 2.000)"
    )


def test_a_replay_tree_after_tree_answers_as_one_of_every_tree_at_once() -> None:
    """A baseline before 7cdaa1e replays every tree at once; since, the bench
    names the trees it goes through and prints a line a tree, with times."""
    at_once = RUN.format(replay="0.4", admissions="2,000", rate="5,000", nominations="2,100")
    tree_lines = (
        "  2 independent cohort trees, replayed one after another\n"
        "  tree div-00  51.5%  1,000/2,000 finished  sim day  1.0  1,000 admissions  15.5 s  "
        "RSS 51 MiB\n"
        "  tree div-00 (1/2): 1,000 workloads in 0.2 s; 1,000 admissions so far, 0.2 s in all, "
        "RSS 51 MiB\n"
    )
    lines = at_once.splitlines(keepends=True)
    by_tree = "".join([*lines[:3], tree_lines, *lines[3:]])
    assert side_by_side.answers(by_tree) == side_by_side.answers(at_once)


def test_a_run_that_gives_other_answers_is_shown_against_the_baseline() -> None:
    base = RUN.format(replay="0.4", admissions="2,000", rate="5,000", nominations="2,100")
    again = RUN.format(replay="0.5", admissions="2,000", rate="4,000", nominations="2,100")
    other = RUN.format(replay="0.4", admissions="1,999", rate="5,000", nominations="2,100")
    same = side_by_side.verdict([("baseline", base), ("working tree", again)])
    assert same == [
        "answers: the same in all 2 runs (admissions, cycles, nominations, preemptions, waits)"
    ]
    runs = [("working tree", again), ("baseline", base), ("working tree", other)]
    shown = side_by_side.verdict(runs)
    assert shown[0] == "answers: DIFFER in 1 of 3 runs; the first, working tree:"
    assert "  -admissions 2,000 , cycles 9,000, preemptions 0 {}, livelocks 0" in shown
    assert "  +admissions 1,999 , cycles 9,000, preemptions 0 {}, livelocks 0" in shown


def _side_by_side(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _worktrees() -> set[str]:
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return {line for line in listed.stdout.splitlines() if line.startswith("worktree ")}


def _engine_unchanged_since_head() -> bool:
    """The working tree answers as HEAD does only if what replays is HEAD's."""
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", "queues", "bench", "scripts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return changed.returncode == 0 and not changed.stdout.strip()


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_a_run_against_head_gives_the_same_answers_and_removes_its_worktree() -> None:
    if not _engine_unchanged_since_head():
        pytest.skip("the working tree's engine or bench differs from HEAD's")
    before = _worktrees()
    # Enough that no replay reads 0.0 s, the bench's tenths of a second.
    args = ["--workloads", "3000", "--teams", "4", "--divisions", "2"]
    done = _side_by_side("HEAD", "--pure", "--runs", "1", "--", *args)
    assert done.returncode == 0, done.stderr
    cores = min(len(os.sched_getaffinity(0)), 2)
    assert f"answers: the same in all {2 * cores} runs" in done.stdout
    assert "working tree / baseline, each run against its partner on the same core" in done.stdout
    assert "baseline      engine: pure Python" in done.stdout
    assert _worktrees() == before


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout")
def test_a_run_that_fails_says_why_and_removes_the_worktree() -> None:
    before = _worktrees()
    done = _side_by_side("HEAD", "--pure", "--runs", "1", "--", "--workloads", "many")
    assert done.returncode == 1
    assert "error: replay_scale.py failed in" in done.stderr
    assert "--workloads: invalid int value: 'many'" in done.stderr
    assert _worktrees() == before


@pytest.mark.parametrize("option", ["--so-far", "--so"])
def test_options_that_print_timings_of_their_own_are_refused(option: str) -> None:
    done = _side_by_side("HEAD", "--pure", "--", option, "5")
    assert done.returncode == 2
    assert "--so-far: prints timings of its own" in done.stderr


def test_a_baseline_that_is_no_commit_is_refused_by_name() -> None:
    done = _side_by_side("no-such-commit", "--pure")
    assert done.returncode == 2
    assert "baseline: 'no-such-commit' is not a commit here" in done.stderr


def test_fewer_than_one_run_is_refused_by_name() -> None:
    done = _side_by_side("HEAD", "--pure", "--runs", "0")
    assert done.returncode == 2
    assert "--runs: at least 1" in done.stderr
