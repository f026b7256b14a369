"""Each sync step runs and fails on its own, on a real kube-apiserver.

Berth runs as a ServiceAccount whose role lacks ``list`` on JobSets (as a real
deployment did): the sync still mirrors queue status, takes its snapshots and
refreshes the forecasts; the step that follows jobs fails with the server's
words, after following the jobs of every other kind; JobSets it could not see
are not taken for gone. Each step's health is recorded, shown on the Overview
and exported in /metrics, and recovers once the verb is granted. The embedded
loop runs the same steps with the same health, and a Berth with no cluster
configuration at all still refreshes its forecasts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from cluster.models import CapacitySnapshot, QueueSnapshot, QueueStatus, SyncStepHealth
from cluster.tasks import sync_cluster
from controlplane.embedded import EmbeddedLoop
from jobs.models import JobRequest, JobState
from jobs.services import create_on_cluster
from queues.models import ReconcileRun
from queues.reconcile import reconcile
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import ControlPlane
from tests.jobs.cluster_roles import Identity, berth_uses, limited_identity
from tests.jobs.conftest import Org, job, org

__all__ = ["org"]

URL = "/api/v1/jobs/"
NO_LIST = 'cannot list resource "jobsets" in API group "jobset.x-k8s.io" at the cluster scope'


@pytest.fixture
def cluster(org: Org, kube: EnvtestCluster) -> EnvtestCluster:
    """The organisation's policy on the real server, a GPU node, and two of
    alice's jobs created there by Berth (a JobSet and a batch Job), both since
    deleted by someone else."""
    kube.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    run = reconcile(kube.backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    kube.add_foreign(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-0", "labels": {"gpu": "h100", "capacity": "on-demand"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "192"}},
        }
    )
    for kind, name in (("JobSet", "js"), ("Job", "bj")):
        response = org.alice.post(URL, job(kind=kind, name=name, nodes=1), format="json")
        assert response.status_code == 201, response.content
        assert create_on_cluster(kube.backend, response.json()["id"]) == "created"
        kube.remove(kind, name, "research")
    return kube


@pytest.fixture
def no_list(control_plane: ControlPlane) -> Iterator[Identity]:
    with limited_identity(
        control_plane, group="jobset.x-k8s.io", resource="jobsets", verb="list"
    ) as identity:
        yield identity


@pytest.fixture
def as_identity(
    control_plane: ControlPlane, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Any]:
    """``as_identity(token)``: Berth's settings name the real server, as that token."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        count = iter(range(100))

        def use(token: str) -> None:
            index = next(count)
            config = control_plane.kubeconfig(tmp_path / f"config-{index}", token)
            home = tmp_path / f"home-{index}"
            stack.enter_context(berth_uses(config, settings, monkeypatch, home))

        yield use


def health() -> dict[str, SyncStepHealth]:
    return {row.step: row for row in SyncStepHealth.objects.all()}


def state(name: str) -> tuple[str, str]:
    stored = JobRequest.objects.get(name=name)
    return stored.state, stored.reason


def metric(text: str, name: str, step: str) -> float:
    found = re.search(rf'^{name}{{step="{step}"}} (\S+)$', text, re.MULTILINE)
    assert found, f"{name}{{step={step}}} not in /metrics"
    return float(found.group(1))


def overview(org: Org) -> str:
    browser = Client()
    browser.force_login(org.users["alice"])
    response = browser.get("/")
    assert response.status_code == 200
    return response.content.decode()


def sync_card(html: str) -> str:
    start = html.index('id="sync-health"')
    return html[start : html.index('<div class="card"', start)]


def test_a_step_the_role_refuses_fails_alone_and_says_why_everywhere(
    org: Org, cluster: EnvtestCluster, no_list: Identity, as_identity: Any, control_plane: Any
) -> None:
    as_identity(no_list.token)
    result = sync_cluster.delay().get()

    # The jobs step failed with the server's words; every other step ran.
    assert set(result["errors"]) == {"jobs"}
    assert NO_LIST in result["errors"]["jobs"]
    assert no_list.user in result["errors"]["jobs"]
    assert result["queue_statuses"] > 0 and result["queues"] > 0 and result["capacity"] > 0
    assert "forecasts" in result and result["resource_version"]
    assert QueueStatus.objects.filter(kind="ClusterQueue", name="research").exists()
    assert QueueSnapshot.objects.filter(cluster_queue="research").exists()
    assert CapacitySnapshot.objects.filter(resource="nvidia.com/gpu", allocatable=8).exists()
    # The batch Job (its kind was listed) is followed: gone from the cluster.
    # The JobSet could not be looked at, which is not the same as gone.
    assert state("bj") == (JobState.FAILED, "Deleted")
    assert state("js") == (JobState.QUEUED, "Created")

    steps = health()
    assert set(steps) == {"workloads", "queue_status", "jobs", "snapshots", "forecasts"}
    failing = steps["jobs"]
    assert not failing.up and failing.consecutive_failures == 1 and failing.failures_total == 1
    assert NO_LIST in failing.last_error
    assert failing.last_run_at is not None and failing.last_success_at is None
    assert all(steps[s].up and steps[s].last_success_at for s in steps if s != "jobs")

    text = Client().get("/metrics").content.decode()  # the test client comes from loopback
    assert metric(text, "berth_sync_step_up", "jobs") == 0
    assert metric(text, "berth_sync_step_consecutive_failures", "jobs") == 1
    assert metric(text, "berth_sync_step_failures_total", "jobs") == 1
    for step in ("workloads", "queue_status", "snapshots", "forecasts"):
        assert metric(text, "berth_sync_step_up", step) == 1
        assert metric(text, "berth_sync_step_consecutive_failures", step) == 0
        last = metric(text, "berth_sync_step_last_success_timestamp_seconds", step)
        assert last == steps[step].last_success_at.timestamp()  # type: ignore[union-attr]
    assert 'berth_sync_step_last_success_timestamp_seconds{step="jobs"}' not in text

    card = sync_card(overview(org))
    assert "Not keeping up: jobs followed." in card
    row = card[card.index('data-sync-step="jobs"') :]
    assert "failing</strong>: failed its latest run" in row.split("</tr>")[0]
    assert ">never<" in row.split("</tr>")[0]  # never succeeded
    assert escape(NO_LIST) in card
    assert card.count(">working</strong>") == 4

    sync_cluster.delay().get()
    assert health()["jobs"].consecutive_failures == 2
    assert "failed its last 2 runs" in sync_card(overview(org))

    # The operator grants the verb (Berth's own role): the step recovers, and
    # the JobSet, now seen to be gone, is followed too.
    as_identity(control_plane.berth_token)
    assert "errors" not in sync_cluster.delay().get()
    recovered = health()["jobs"]
    assert recovered.up and recovered.consecutive_failures == 0
    assert recovered.failures_total == 2 and recovered.last_success_at is not None
    assert state("js") == (JobState.FAILED, "Deleted")
    text = Client().get("/metrics").content.decode()
    assert metric(text, "berth_sync_step_up", "jobs") == 1
    assert metric(text, "berth_sync_step_failures_total", "jobs") == 2
    card = sync_card(overview(org))
    assert "Every step of the sync is working." in card and "Not keeping up" not in card


def test_the_embedded_loop_runs_the_same_steps_with_the_same_health(
    org: Org, cluster: EnvtestCluster, no_list: Identity, as_identity: Any
) -> None:
    as_identity(no_list.token)
    EmbeddedLoop().run_once()
    steps = health()
    assert set(steps) == {"workloads", "queue_status", "jobs", "snapshots", "forecasts"}
    assert not steps["jobs"].up and NO_LIST in steps["jobs"].last_error
    assert all(steps[s].up for s in steps if s != "jobs")
    assert QueueSnapshot.objects.exists() and CapacitySnapshot.objects.exists()
    assert state("bj") == (JobState.FAILED, "Deleted")
    assert state("js") == (JobState.QUEUED, "Created")


def test_with_no_cluster_configuration_each_cluster_step_says_so_and_forecasts_still_run(
    db: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with berth_uses(None, settings, monkeypatch, tmp_path / "empty-home"):
        result = sync_cluster.delay().get()
        loop = EmbeddedLoop()
        loop.run_once()  # reconcile, the simulated step, approvals: each fails alone
    assert set(result["errors"]) == {"workloads", "queue_status", "jobs", "snapshots"}
    assert all(
        "no cluster configuration could be loaded" in error for error in result["errors"].values()
    )
    assert result["forecasts"] == 0
    steps = health()
    assert steps["forecasts"].up
    assert [s for s in steps if not steps[s].up] == [
        "jobs",
        "queue_status",
        "snapshots",
        "workloads",
    ]
    assert steps["workloads"].consecutive_failures == 2  # the task, then the loop
    [run] = ReconcileRun.objects.filter(trigger=ReconcileRun.Trigger.PERIODIC)
    assert run.status == ReconcileRun.Status.FAILED
    assert "no cluster configuration could be loaded" in run.message


def test_on_the_simulated_cluster_every_step_runs_and_is_recorded_up(db: Any) -> None:
    result = sync_cluster.delay().get()
    assert "errors" not in result
    steps = health()
    assert set(steps) == {"workloads", "queue_status", "jobs", "snapshots", "forecasts"}
    assert all(s.up and s.failures_total == 0 and s.last_success_at for s in steps.values())
    assert all(s.last_duration_seconds is not None for s in steps.values())
