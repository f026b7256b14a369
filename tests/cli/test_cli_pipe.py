"""``berth`` whose reader goes away (``berth list | head``): the real entry
points, run as processes with a stdout pipe whose reading end is already
closed, exit 141 (128 + SIGPIPE, as ``cat`` or ``git`` would) with nothing on
stderr: no traceback, no "Exception ignored" from the interpreter's last
flush."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accounts.services import create_token
from tests.jobs.conftest import Org, job

BERTH = Path(sys.executable).with_name("berth")
ENTRY_POINTS = {
    "berth": [str(BERTH)],
    "python -m berth_cli": [sys.executable, "-m", "berth_cli"],
}
SUBMIT = [
    "submit", "--dry-run", "--name", "piped", "--image", "reg.example.com/t:1",
    "--queue", "training-large", "--nodes", "2", "--gpus-per-node", "8",
    "--checkpoint", "s3://bucket/piped", "--", "python", "train.py",
]  # fmt: skip
COMMANDS = {
    "help": ["--help"],
    "submit-help": ["submit", "--help"],
    "version": ["--version"],
    "list": ["list"],
    "list-json": ["list", "--all", "-o", "json"],
    "status": ["status", "qwen-sft"],
    "status-yaml": ["status", "qwen-sft", "-o", "yaml"],
    "why": ["why", "qwen-sft"],
    "queues": ["queues"],
    "dry-run": SUBMIT,
    "dry-run-manifest": [*SUBMIT[:-3], "--show-manifest", *SUBMIT[-3:]],
    "approvals": ["approvals", "list", "--all"],
}


@pytest.fixture
def environment(
    transactional_db: Any, org: Org, live_server: Any, tmp_path: Path
) -> dict[str, str]:
    assert org.alice.post("/api/v1/jobs/", job(), format="json").status_code == 201
    secret = create_token(user=org.users["alice"], name="cli").secret
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("BERTH_")},
        "BERTH_URL": live_server.url,
        "BERTH_TOKEN": secret,
        "BERTH_CONFIG": str(tmp_path / "config.json"),
    }


def run_into_a_closed_pipe(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run with stdout a pipe nobody reads any more: every write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode()


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_exits_quietly_when_its_reader_is_gone(
    environment: dict[str, str], name: str
) -> None:
    assert BERTH.exists(), f"{BERTH}: install the package (make run or make test does)"
    code, err = run_into_a_closed_pipe([*ENTRY_POINTS["berth"], *COMMANDS[name]], environment)
    assert err == "", err
    assert code == 141


def test_python_dash_m_behaves_the_same(environment: dict[str, str]) -> None:
    code, err = run_into_a_closed_pipe([*ENTRY_POINTS["python -m berth_cli"], "list"], environment)
    assert (code, err) == (141, "")


def test_with_its_reader_there_the_same_commands_print_and_exit_0(
    environment: dict[str, str],
) -> None:
    for name in ("status", "queues", "dry-run"):
        done = subprocess.run(
            [*ENTRY_POINTS["berth"], *COMMANDS[name]],
            capture_output=True,
            env=environment,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (0, b""), done.stderr
        assert done.stdout.strip(), name


def test_a_failure_still_says_why_on_stderr_when_stdout_is_gone(
    environment: dict[str, str],
) -> None:
    code, err = run_into_a_closed_pipe([*ENTRY_POINTS["berth"], "status", "nope"], environment)
    assert (code, err) == (1, "berth: no job nope in your teams\n")
