"""The CLI is its own distribution: built from ``cli/`` alone, installed in a
fresh virtual environment with no Django (nor anything else), it runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    # Run from elsewhere: in the checkout, python -c would find the server packages.
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=300, cwd=Path.home()
    )


def test_the_cli_installs_and_runs_in_a_venv_without_django(tmp_path: Path) -> None:
    # Built from a copy (the build leaves build/ and egg-info behind) with this
    # environment's setuptools, so no package index is needed.
    source = shutil.copytree(ROOT / "cli", tmp_path / "cli")
    built = run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--wheel-dir", tmp_path / "wheels", source,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheels").glob("berth_cli-*.whl")
    venv = tmp_path / "laptop"
    made = run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    python, berth = venv / "bin" / "python", venv / "bin" / "berth"
    installed = run(python, "-m", "pip", "install", "--quiet", "--no-index", wheel)
    assert installed.returncode == 0, installed.stderr

    helped = run(berth, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "submit" in helped.stdout and "why" in helped.stdout
    version = run(berth, "--version")
    assert version.returncode == 0 and version.stdout.startswith("berth 0.1.0"), version
    # Nothing but the CLI came with it.
    listed = run(python, "-m", "pip", "list", "--format=freeze")
    packages = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert packages - {"pip", "setuptools"} == {"berth-cli"}, packages
    for server_side in ("django", "yaml", "jobs", "queues"):
        assert run(python, "-c", f"import {server_side}").returncode != 0, server_side
