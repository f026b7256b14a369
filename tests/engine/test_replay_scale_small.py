"""``bench/replay_scale.py`` on a small organisation: it runs through and
prints its waits table whole, with no wait shown for a queue class none of
whose workloads was admitted (it crashed on that class's NaN wait before)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "replay_scale.py"


def test_a_class_none_of_was_admitted_shows_no_wait() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--workloads", "200", "--teams", "4", "--divisions", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # 200 workloads hold no urgent release (0.1% of the mix).
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("urgent-release")]
    assert row.split() == ["urgent-release", "0", "0", "-", "-", "-", "0"]
    (interactive,) = [line for line in done.stdout.splitlines() if line.startswith("interactive")]
    assert "-" not in interactive.split()  # admitted ones keep their waits


def test_cycle_times_are_printed_by_kind_when_asked() -> None:
    args = [sys.executable, str(BENCH), "--workloads", "200", "--teams", "4", "--divisions", "2"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    assert "cycle times:" not in plain.stdout
    timed = subprocess.run(
        [*args, "--cycle-times"], capture_output=True, text=True, timeout=120, check=True
    )
    (line,) = [line for line in timed.stdout.splitlines() if line.startswith("cycle times:")]
    kinds = [part.split()[0] for part in line.removeprefix("cycle times: ").split(", ")]
    assert kinds == ["changing", "telling", "confirming"]
    assert "µs each" in line


def _answers(stdout: str) -> list[str]:
    """What a replay answered, as the bench prints it: admissions, cycles,
    nominations and the waits table (times and memory left out)."""
    keep = ("admissions ", "cycles ", "nominations ", *LOAD_NAMES)
    lines = [line for line in stdout.splitlines() if line.startswith(keep)]
    return [re.sub(r" \([\d,]+/s\)", "", line) for line in lines]


LOAD_NAMES = ("interactive-dev", "eval-batch", "training-large", "urgent-release")


def test_tree_after_tree_answers_as_the_trees_replayed_at_once() -> None:
    args = [
        sys.executable,
        str(BENCH),
        *("--workloads", "3000", "--teams", "12", "--divisions", "3", "--days", "3"),
    ]
    by_tree = subprocess.run(args, capture_output=True, text=True, timeout=300, check=True)
    together = subprocess.run(
        [*args, "--together"], capture_output=True, text=True, timeout=300, check=True
    )
    printed = by_tree.stdout.splitlines()
    ends = [line for line in printed if line.startswith("  tree ") and "workloads in" in line]
    trees = [line.split(":")[0].strip() for line in ends]
    assert trees == ["tree div-00 (1/3)", "tree div-01 (2/3)", "tree div-02 (3/3)"]
    assert not any("  tree " in line for line in together.stdout.splitlines())
    answers = _answers(by_tree.stdout)
    assert len(answers) == 3 + len(LOAD_NAMES)
    assert answers == _answers(together.stdout)


def _replay(args: list[str]) -> tuple[int, str]:
    """The bench's pid and what it printed."""
    bench = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = bench.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        bench.kill()
        bench.communicate()
        raise
    assert bench.returncode == 0, out
    return bench.pid, out


@pytest.mark.parametrize("workers", [1, 2])
def test_trees_replayed_in_worker_processes_answer_as_one_process(workers: int) -> None:
    args = [
        sys.executable,
        str(BENCH),
        *("--workloads", "3000", "--teams", "12", "--divisions", "3", "--days", "3"),
    ]
    _, alone = _replay(args)
    parent, shared = _replay([*args, "--workers", str(workers)])
    printed = shared.splitlines()
    ends = [line for line in printed if line.startswith("  tree ") and "workloads in" in line]
    assert len(ends) == 3
    pids = {int(pid) for line in ends for pid in re.findall(r"worker (\d+)\)", line)}
    assert pids and parent not in pids
    assert len(pids) <= workers
    sizes = {line.split()[1]: int(line.split(": ")[1].split()[0].replace(",", "")) for line in ends}
    assert sorted(sizes) == ["div-00", "div-01", "div-02"]
    if workers == 1:
        # One worker takes them in the order given: biggest first, which is
        # not the trees' names' order here.
        assert list(sizes.values()) == sorted(sizes.values(), reverse=True)
        assert list(sizes) != sorted(sizes)
    begun = [line for line in printed if line.startswith("  tree ") and " begun in worker " in line]
    assert sorted(line.split()[1] for line in begun) == ["div-00", "div-01", "div-02"]
    (merged,) = [line for line in printed if line.startswith("  merged in")]
    assert re.search(
        r"largest worker peak [\d,]+ MiB resident; a worker's own memory "
        r"\(pages no other process maps\) at most [\d,]+ MiB at a tree's end",
        merged,
    )
    answers = _answers(shared)
    # The cycles and nominations are the workers' counts, summed.
    assert len(answers) == 3 + len(LOAD_NAMES)
    assert answers == _answers(alone)


def test_a_tree_past_the_memory_cap_in_a_worker_stops_the_replay() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            *("--workloads", "16000", "--teams", "16", "--divisions", "8", "--days", "3"),
            *("--workers", "2", "--max-rss-gib", "0.01"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "is past the cap" in done.stderr
    printed = done.stdout.splitlines()
    assert not [line for line in printed if line.startswith("  merged in")]
    begun = [line for line in printed if " begun in worker " in line]
    # The trees not yet handed to a worker are cancelled, the workers ended:
    # at most one more each, and one queued beside them, begin after the first fails.
    assert 1 <= len(begun) < 8


def test_trees_replayed_as_one_what_if_part_answer_as_one_process() -> None:
    args = [
        sys.executable,
        str(BENCH),
        *("--workloads", "3000", "--teams", "12", "--divisions", "3", "--days", "3"),
    ]
    _, alone = _replay(args)
    _, as_part = _replay([*args, "--as-part"])
    printed = as_part.splitlines()
    marks = [line for line in printed if line.startswith("  milestone ")]
    assert [line.split(":")[0] for line in marks] == [f"  milestone {i}/11" for i in range(1, 12)]
    assert "cycles and nominations: counted inside the part, not printed" in printed
    answers = [line for line in _answers(as_part) if not line.startswith("cycles and ")]
    assert len(answers) == 1 + len(LOAD_NAMES)
    assert answers == [line for line in _answers(alone) if not line.startswith(("cycles ", "nom"))]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--workers", "-1"], "--workers: a number of worker processes, 0"),
        (["--workers", "2", "--together"], "it does not go with --together or --so-far"),
        (["--workers", "2", "--so-far", "5"], "it does not go with --together or --so-far"),
        (["--as-part", "--workers", "2"], "it does not go with --together, --so-far or --workers"),
        (["--workers", "2", "--profile", "x.prof"], "--profile and --tracemalloc watch"),
        (["--workers", "2", "--tracemalloc"], "--profile and --tracemalloc watch"),
        (["--as-part", "--together"], "it does not go with --together, --so-far or --workers"),
        (["--as-part", "--so-far", "5"], "it does not go with --together, --so-far or --workers"),
    ],
)
def test_workers_that_cannot_be_are_refused_before_anything_is_made(
    flags: list[str], said: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--workloads", "200", *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert said in done.stderr
    assert "generating" not in done.stdout


def test_a_trees_progress_is_printed_every_15_s_not_every_5_percent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sys.path.insert(0, str(BENCH.parent))
    from replay_scale import Progress

    simulator: Any = SimpleNamespace(scheduler=SimpleNamespace(now=0.0), admissions=0)
    progress = Progress(simulator, time.perf_counter(), 1e9, label="tree div-00", by_share=False)
    for done in range(1, 10):
        progress(done, 10)
    assert capsys.readouterr().out == ""
    progress.started -= 16  # 16 s on
    progress(9, 10)
    progress(10, 10)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("  tree div-00  90.0%")
    by_share = Progress(simulator, time.perf_counter(), 1e9)
    by_share(0, 10)
    by_share(1, 10)
    by_share(2, 10)
    printed = capsys.readouterr().out.splitlines()
    assert [line.split("%")[0] for line in printed] == [
        "  replay   0.0",
        "  replay  10.0",
        "  replay  20.0",
    ]
