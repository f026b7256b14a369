"""``bench/replay_scale.py`` replays under a fixed string-hashing seed
(``--hash-seed``, 0 by default): the seed moves a replay's time, never its
answers, so only runs under the same one compare. A small run also prints
its waits table whole, with no wait shown for a class none of was admitted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "replay_scale.py"


def _bench(*args: str, seed_in_environment: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    if seed_in_environment is not None:
        environment["PYTHONHASHSEED"] = seed_in_environment
    return subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--workloads",
            "200",
            "--teams",
            "4",
            "--divisions",
            "2",
            *args,
        ],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("seed", ["7", "random"])
def test_the_replay_runs_under_the_seed_asked_whatever_the_environment_says(seed: str) -> None:
    done = _bench("--hash-seed", seed, seed_in_environment="3")
    assert done.returncode == 0, done.stderr
    assert f"string hashing: PYTHONHASHSEED={seed} (--hash-seed)" in done.stdout
    assert "admissions" in done.stdout


def test_by_default_it_runs_under_seed_0() -> None:
    done = _bench()
    assert done.returncode == 0, done.stderr
    assert "string hashing: PYTHONHASHSEED=0 (--hash-seed)" in done.stdout
    # 200 workloads hold no urgent release (0.1% of the mix): no wait to show.
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("urgent-release")]
    assert row.split() == ["urgent-release", "0", "0", "-", "-", "-", "0"]


@pytest.mark.parametrize("seed", ["x", "-1", "4294967296", ""])
def test_a_seed_python_would_refuse_is_named_with_its_rule(seed: str) -> None:
    done = _bench("--hash-seed", seed)
    assert done.returncode == 2
    assert (
        f"--hash-seed: {seed!r} must be a whole number from 0 to 4294967295, or random"
        in done.stderr
    )
    assert "string hashing" not in done.stdout  # refused before anything ran
