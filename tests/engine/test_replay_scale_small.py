"""``bench/replay_scale.py`` on a small organisation: it runs through and
prints its waits table whole, with no wait shown for a queue class none of
whose workloads was admitted (it crashed on that class's NaN wait before)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
