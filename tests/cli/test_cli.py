"""The ``berth`` CLI against a real Berth over HTTP (pytest-django's live
server), called in-process: login, submit and its dry run, list, status, why,
cancel, queues, the error lines and exit codes, and a job followed from the
CLI's submit to success on the simulated cluster."""

from __future__ import annotations

import argparse
import json
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import berth_cli as cli
from accounts.services import create_token
from berth_cli import base, commands
from cluster.sync import sync_workloads
from jobs.follow import follow_jobs
from jobs.models import JobRequest, JobState
from queues.backends.simulated import SimulatedBackend
from queues.models import ReconcileRun
from queues.reconcile import reconcile
from queues.simulation.kueue import SimulatedKueue
from tests.jobs.conftest import Org

SUBMIT = [
    "submit",
    "--name",
    "qwen-sft",
    "--image",
    "registry.example.com/qwen-trainer:2026.05",
    "--queue",
    "training-large",
    "--nodes",
    "2",
    "--gpus-per-node",
    "8",
    "--priority",
    "train-low",
    "--checkpoint",
    "s3://bucket/qwen-sft",
]
COMMAND = ["--", "python", "train.py", "--config", "configs/qwen-sft.yaml"]


class Berth:
    """Runs ``berth ...`` in-process; each call answers (exit code, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()  # drop anything printed before
        code = cli.main(list(argv))
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private config path, and no address or token from the caller's shell."""
    path = tmp_path / "berth" / "config.json"
    monkeypatch.setenv("BERTH_CONFIG", str(path))
    monkeypatch.delenv("BERTH_URL", raising=False)
    monkeypatch.delenv("BERTH_TOKEN", raising=False)
    return path


@pytest.fixture
def berth(capsys: pytest.CaptureFixture[str], config: Path) -> Berth:
    return Berth(capsys)


def secret_for(org: Org, username: str) -> str:
    return create_token(user=org.users[username], name="cli").secret


@pytest.fixture
def alice(
    transactional_db: Any, org: Org, live_server: Any, monkeypatch: pytest.MonkeyPatch, berth: Berth
) -> Berth:
    """``berth`` as alice (research), pointed at the live server by the environment."""
    monkeypatch.setenv("BERTH_URL", live_server.url)
    monkeypatch.setenv("BERTH_TOKEN", secret_for(org, "alice"))
    return berth


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("berth: "), err
    return lines[0]


# --- pure parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1h30m", 5400)],
)
def test_durations(text: str, seconds: int) -> None:
    assert base.parse_duration(text) == seconds


def test_the_cli_reads_durations_as_the_api_does() -> None:
    from berth_cli import durations

    assert base.parse_duration("1h30m") == durations.parse_duration("1h30m") == 5400
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        base.parse_duration("2x")
    assert str(refused.value) == "'2x' is not a duration: " + durations.DURATION_FORMS


def test_the_cli_imports_without_django() -> None:
    # What a laptop with only the package has: the standard library.
    blocked = ["django", "rest_framework", "kubernetes", "celery", "yaml", "jobs", "queues"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "from berth_cli import main\n"
        "from berth_cli.base import parse_duration\n"
        "assert parse_duration('2h') == 7200 and main(['--version']) == 0\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_bad_flags_are_refused_on_one_line_before_anything_is_sent(berth: Berth) -> None:
    # No server and no login: these never get as far as needing one.
    code, _, err = berth(*SUBMIT, "--max-runtime", "2x", *COMMAND)
    assert code == 2
    assert "--max-runtime" in one_line(err) and "not a duration" in err
    code, _, err = berth(*SUBMIT, "--env", "NOEQUALS", *COMMAND)
    assert code == 2 and "KEY=VALUE" in one_line(err)
    code, _, err = berth("submit", "--name", "x", *COMMAND)
    assert code == 2 and "--image" in one_line(err)
    code, _, err = berth(*SUBMIT)
    assert code == 2 and "after `--`" in one_line(err)
    code, _, err = berth("list")
    assert code == 1 and "berth login" in one_line(err)


# --- login -----------------------------------------------------------------------


def test_login_checks_the_token_and_saves_it_private(
    transactional_db: Any,
    org: Org,
    live_server: Any,
    berth: Berth,
    config: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = secret_for(org, "alice")
    code, out, err = berth("login", "--url", live_server.url + "/", "--token", token)
    assert code == 0, err
    assert "as alice" in out and "research (member)" in out
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {"url": live_server.url, "token": token}

    # The saved login is used with no environment at all.
    code, out, err = berth("list")
    assert (code, out.strip()) == (0, "No jobs."), err

    # A bad token is refused by /me/, on one line, and the saved login stays.
    code, out, err = berth("login", "--url", live_server.url, "--token", "berth_not-a-token")
    assert code == 1 and out == ""
    line = one_line(err)
    assert "refused the token" in line and "berth login" in line
    assert json.loads(config.read_text())["token"] == token

    # BERTH_TOKEN overrides the saved one, for every command.
    monkeypatch.setenv("BERTH_TOKEN", "berth_revoked")
    code, out, err = berth("list")
    assert code == 1 and out == "" and "berth login" in one_line(err)


def test_login_takes_the_token_from_the_environment_or_a_prompt(
    transactional_db: Any,
    org: Org,
    live_server: Any,
    berth: Berth,
    config: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BERTH_TOKEN", secret_for(org, "bob"))
    code, out, err = berth("login", "--url", live_server.url, "-o", "json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["me"]["username"] == "bob" and "token" not in answer

    monkeypatch.delenv("BERTH_TOKEN")
    pasted = secret_for(org, "alice")
    monkeypatch.setattr(commands.getpass, "getpass", lambda prompt: pasted + "\n")
    code, out, err = berth("login", "--url", live_server.url)
    assert code == 0, err
    assert "as alice" in out
    assert json.loads(config.read_text())["token"] == pasted


def test_an_unreachable_url_exits_1_naming_it(
    berth: Berth, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("BERTH_URL", url)
    monkeypatch.setenv("BERTH_TOKEN", "berth_whatever")
    code, out, err = berth("list")
    assert code == 1 and out == ""
    line = one_line(err)
    assert f"cannot reach Berth at {url}" in line and "berth login" in line
    code, _, err = berth("login", "--url", url, "--token", "berth_whatever")
    assert code == 1 and url in one_line(err)


# --- submit ----------------------------------------------------------------------


def test_a_dry_run_says_where_it_lands_and_whether_it_fits(alice: Berth) -> None:
    code, out, err = alice(*SUBMIT, "--dry-run", *COMMAND)
    assert code == 0, err
    assert "nothing was created" in out
    assert "research/research → ClusterQueue research (training-large)" in out
    assert "Fits now:   yes" in out
    assert "Position:   1" in out
    assert "main: nvidia.com/gpu=h100" in out
    assert "Start:" in out and "unknown" not in out

    code, out, err = alice(*SUBMIT, "--dry-run", "-o", "json", *COMMAND)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["dry_run"] is True and answer["cluster_queue"] == "research"
    assert answer["manifest"][0]["spec"]["template"]["spec"]["containers"][0]["command"][:2] == [
        "python",
        "train.py",
    ]

    code, out, err = alice(*SUBMIT, "--dry-run", "-o", "yaml", *COMMAND)
    assert code == 0 and yaml.safe_load(out)["fits_now"] is True

    code, out, err = alice(*SUBMIT, "--dry-run", "--show-manifest", *COMMAND)
    assert code == 0, err
    assert out.startswith("# Dry run")  # the summary, as YAML comments
    main, *_ = [doc for doc in yaml.safe_load_all(out) if doc]  # the Job, then its Service
    assert main["kind"] == "Job"
    assert main["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert JobRequest.objects.count() == 0


def test_a_policy_error_exits_2_naming_the_field_and_rule(alice: Berth) -> None:
    without_checkpoint = [a for a in SUBMIT if a not in ("--checkpoint", "s3://bucket/qwen-sft")]
    code, out, err = alice(*without_checkpoint, *COMMAND)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert all(line.startswith("berth: ") for line in lines)
    assert any(
        line.startswith("berth: checkpoint_uri: ") and line.endswith("(checkpoint-required)")
        for line in lines
    ), err
    assert JobRequest.objects.count() == 0


def test_a_queue_class_the_team_lacks_is_explained_as_the_api_says_it(
    alice: Berth, org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BERTH_TOKEN", secret_for(org, "bob"))  # serving: no eval-batch queue
    queue = SUBMIT.index("training-large")
    code, out, err = alice(*SUBMIT[:queue], "eval-batch", *SUBMIT[queue + 1 :], *COMMAND)
    assert (code, out) == (2, "")
    assert one_line(err) == (
        "berth: queue: team serving has no eval-batch queue and no shared queue takes "
        "eval-batch jobs: ask a platform admin for one, or submit to one of your team's queues "
        "in namespace serving: serving (training-large), urgent (urgent-release, shared) "
        "(no-queue-of-class)"
    )


def test_submit_then_list_status_why_and_cancel_by_name(alice: Berth, org: Org) -> None:
    code, out, err = alice(
        *SUBMIT,
        "--max-runtime",
        "2h",
        "--env",
        "WANDB_PROJECT=qwen",
        "--label",
        "experiment=sft-7",
        *COMMAND,
    )
    assert code == 0, err
    assert "Submitted qwen-sft" in out and "ClusterQueue research" in out
    stored = JobRequest.objects.get()
    assert stored.max_runtime_seconds == 7200
    assert stored.env == {"WANDB_PROJECT": "qwen"} and stored.labels == {"experiment": "sft-7"}
    assert stored.command == ["python", "train.py", "--config", "configs/qwen-sft.yaml"]
    assert stored.state == JobState.QUEUED  # created on the (simulated) cluster after commit

    code, out, err = alice("list")
    assert code == 0, err
    header, row = out.strip().splitlines()
    assert header.split() == ["NAME", "TEAM", "QUEUE", "STATE", "NODES×GPUS", "WAIT", "SUBMITTED"]
    assert row.split()[:5] == ["qwen-sft", "research", "research", "queued", "2×8"]
    code, out, _ = alice("list", "--state", "running", "succeeded")
    assert (code, out.strip()) == (0, "No jobs.")
    code, out, _ = alice("list", "--all", "-o", "json")
    assert [j["name"] for j in json.loads(out)] == ["qwen-sft"]

    code, out, err = alice("status", "qwen-sft")
    assert code == 0, err
    assert "State:" in out and "queued" in out
    assert "ClusterQueue research (training-large)" in out
    assert "Timeline:" in out and "submitted" in out and "created-on-cluster" in out
    code, out, _ = alice("status", "qwen-sft", "-o", "json")
    detail = json.loads(out)
    assert detail["id"] == stored.pk and detail["events"][0]["type"] == "submitted"

    code, out, err = alice("why", "qwen-sft")
    assert code == 0, err
    assert "qwen-sft is queued in ClusterQueue research." in out
    code, out, _ = alice("why", "qwen-sft", "-o", "json")
    assert json.loads(out)["job"] == stored.pk

    code, _, err = alice("status", "no-such-job")
    assert code == 1 and one_line(err) == "berth: no job no-such-job in your teams"

    code, out, err = alice("cancel", "qwen-sft")
    assert code == 0, err
    assert "Cancelling qwen-sft" in out
    stored.refresh_from_db()
    assert stored.state in (JobState.CANCELLING, JobState.CANCELLED)


def test_another_teams_job_is_not_found(org: Org, alice: Berth, monkeypatch: Any) -> None:
    code, _, err = alice(*SUBMIT, *COMMAND)
    assert code == 0, err
    monkeypatch.setenv("BERTH_TOKEN", secret_for(org, "bob"))
    for command in ("status", "why", "cancel"):
        code, out, err = alice(command, "qwen-sft")
        assert code == 1 and out == ""
        assert one_line(err) == "berth: no job qwen-sft in your teams"
    code, out, _ = alice("list")
    assert out.strip() == "No jobs."


def test_cancelling_an_ended_job_exits_1(alice: Berth) -> None:
    code, _, err = alice(*SUBMIT, *COMMAND)
    assert code == 0, err
    JobRequest.objects.update(state=JobState.SUCCEEDED)
    code, out, err = alice("cancel", "qwen-sft")
    assert code == 1 and out == ""
    assert "already ended" in one_line(err)


def test_queues_lists_my_local_queues_with_class_and_gpu_quota(alice: Berth) -> None:
    code, out, err = alice("queues")
    assert code == 0, err
    rows = {line.split()[2]: line for line in out.strip().splitlines()[1:]}
    assert set(rows) >= {"research", "research-eval", "research-dev"}
    assert "serving" not in rows  # another team's queue
    assert "training-large" in rows["research"] and "h100=16 (+8 borrowable)" in rows["research"]
    assert "eval-batch" in rows["research-eval"] and "h100-spot=8" in rows["research-eval"]
    code, out, _ = alice("queues", "-o", "yaml")
    by_queue = {row["cluster_queue"]: row for row in yaml.safe_load(out)}
    assert by_queue["research-dev"]["queue_class"] == "interactive-dev"
    assert {row["namespace"] for row in by_queue.values()} == {"research"}


def test_queues_show_only_the_flavors_the_queue_class_can_use(alice: Berth) -> None:
    from tests.jobs.test_jobs_api import spot_in_a_class_that_refuses_it

    spot_in_a_class_that_refuses_it()  # interactive-dev: h100=0 (+16), h100-spot=8
    code, out, err = alice("queues")
    assert code == 0, err
    table, notes = out.split("\n\n")
    rows = {line.split()[1]: line for line in table.splitlines()[1:]}
    assert rows["research-mixed"].split()[3:] == [
        "interactive-dev",
        "no",
        "h100=0",
        "(+16",
        "borrowable)",
    ]
    assert "h100-spot" not in rows["research-mixed"]
    assert "h100-spot=8" in rows["research-eval"]  # eval-batch runs on spot
    assert notes.splitlines() == [
        "Not offered to jobs there:",
        "  research/research-mixed: not h100-spot: spot capacity, and queue class "
        "interactive-dev does not run jobs on spot",
    ]
    code, out, _ = alice("queues", "--team", "serving")
    assert {line.split()[1] for line in out.splitlines()[1:]} == {"serving", "urgent"}


# --- end to end ------------------------------------------------------------------


def test_a_job_submitted_with_the_cli_is_admitted_runs_and_succeeds(alice: Berth) -> None:
    backend = SimulatedBackend()
    run = reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL)
    assert run.status == "succeeded", run.errors
    kueue = SimulatedKueue(backend, 60.0)

    code, out, err = alice(*SUBMIT, "--expected-runtime", "10m", *COMMAND)
    assert code == 0, err
    job = JobRequest.objects.get()
    assert job.state == JobState.QUEUED

    def at(now: float) -> None:
        kueue.tick(now)
        sync_workloads(backend)
        follow_jobs(backend)

    t0 = time.time()
    at(t0)
    code, out, err = alice("status", "qwen-sft")
    assert code == 0, err
    assert "running" in out and "main: nvidia.com/gpu=h100" in out
    assert "research/job-qwen-sft" in out
    code, out, _ = alice("list", "-o", "json")
    assert json.loads(out)[0]["state"] == "running"

    at(t0 + 11)  # 600 s of work at 60x
    code, out, err = alice("status", "qwen-sft")
    assert code == 0, err
    assert "State:" in out and "succeeded" in out
    timeline = out.split("Timeline:", 1)[1]
    events = [line.split()[3] for line in timeline.strip().splitlines()[1:]]
    for expected in ("submitted", "created-on-cluster", "admitted", "finished"):
        assert expected in events, timeline
    assert events.index("admitted") < events.index("finished")
    code, out, _ = alice("why", "qwen-sft")
    assert "qwen-sft is succeeded" in out and "not waiting" in out


def test_why_a_waiting_job_shows_what_is_short_and_what_would_help(alice: Berth) -> None:
    backend = SimulatedBackend()
    assert reconcile(backend, trigger=ReconcileRun.Trigger.MANUAL).status == "succeeded"
    kueue = SimulatedKueue(backend, 60.0)
    assert alice(*SUBMIT, "--expected-runtime", "1h", *COMMAND)[0] == 0
    kueue.tick(time.time())  # qwen-sft takes the queue's 16 nominal GPUs
    sync_workloads(backend)
    second = [*SUBMIT[:2], "second", *SUBMIT[3:]]  # 16 more; only 8 can be borrowed

    code, out, err = alice(*second, "--dry-run", *COMMAND)
    assert code == 0, err
    assert "Fits now:   no" in out and "Why:" in out

    assert alice(*second, *COMMAND)[0] == 0
    kueue.tick(time.time() + 1)
    sync_workloads(backend)
    follow_jobs(backend)
    code, out, err = alice("why", "second")
    assert code == 0, err
    assert out.startswith("second is queued in ClusterQueue research.")
    assert "fits now: no" in out
    short = out.split("Short:", 1)[1].split("Suggestions:", 1)[0].strip().splitlines()
    assert short[0].split() == ["FLAVOR", "RESOURCE", "REQUESTED", "AVAILABLE", "SHORT", "BY"]
    assert short[1].split() == ["h100", "nvidia.com/gpu", "16", "8", "8"]
    suggestions = out.split("Suggestions:", 1)[1]
    assert "[fewer-resources]" in suggestions and "research/job-qwen-sft" in suggestions
