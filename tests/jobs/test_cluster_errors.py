"""A cluster that refuses Berth never strands a job or answers a client 500.

On a real kube-apiserver, Berth runs (embedded: no broker, so the create and
delete tasks run inside the request, as ``make run`` does) as a ServiceAccount
whose role lacks one verb. A job it may not create is answered 201 and ends
``rejected`` with the server's reason and message, which name the verb and the
resource, in the API, on the job page and in the CLI; so does one whose
existing-object check (the ``get`` before the create) or whose headless
Service is refused. A cancel whose delete is refused answers 202, says why and
completes once the verb is granted. With no cluster configuration at all a
submit answers 201 and the job says Berth cannot reach its cluster."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

import berth_cli as cli
from accounts.services import create_token
from jobs.models import JobRequest, JobState
from jobs.tasks import sweep_jobs
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import ControlPlane
from tests.jobs.cluster_roles import Identity, berth_uses, limited_identity
from tests.jobs.conftest import Org, job

URL = "/api/v1/jobs/"
# kind → (API group, resource) as RBAC names them
RESOURCES = {
    "Job": ("batch", "jobs"),
    "JobSet": ("jobset.x-k8s.io", "jobsets"),
    "PyTorchJob": ("kubeflow.org", "pytorchjobs"),
    "TrainJob": ("trainer.kubeflow.org", "trainjobs"),
}
UseBerth = Callable[[Identity | None], None]
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def research(kube: EnvtestCluster, org: Org) -> EnvtestCluster:
    """The real server with the research team's namespace, and the organisation."""
    kube.add_foreign(NAMESPACE)
    return kube


@pytest.fixture
def berth_as(
    control_plane: ControlPlane,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[UseBerth]:
    """``berth_as(identity)``: from here on Berth's settings name the real server,
    reached with that identity's token (None: Berth's own ServiceAccount)."""
    with ExitStack() as stack:
        count = itertools.count()

        def use(identity: Identity | None) -> None:
            index = next(count)
            token = identity.token if identity is not None else control_plane.berth_token
            config = control_plane.kubeconfig(tmp_path / f"config-{index}", token)
            home = tmp_path / f"home-{index}"
            stack.enter_context(berth_uses(config, settings, monkeypatch, home))

        yield use


def without(control_plane: ControlPlane, kind: str, verb: str) -> Any:
    group, resource = RESOURCES[kind]
    return limited_identity(control_plane, group=group, resource=resource, verb=verb)


def page_of(org: Org, job_id: int) -> str:
    browser = Client()
    browser.force_login(org.users["alice"])
    response = browser.get(f"/jobs/{job_id}/")
    assert response.status_code == 200
    return response.content.decode()


def berth_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def alice_cli(org: Org, live_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The ``berth`` CLI as alice, against this Berth over HTTP."""
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "berth.json"))
    monkeypatch.setenv("BERTH_URL", live_server.url)
    monkeypatch.setenv("BERTH_TOKEN", create_token(user=org.users["alice"], name="cli").secret)


# --- create refused: the acceptance test ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["JobSet", "PyTorchJob", "TrainJob"])
def test_a_kind_the_role_may_not_create_is_rejected_in_the_servers_words_everywhere(
    kind: str,
    org: Org,
    research: EnvtestCluster,
    control_plane: ControlPlane,
    berth_as: UseBerth,
    alice_cli: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    group, resource = RESOURCES[kind]
    name = f"sft-{kind.lower()}"
    with without(control_plane, kind, "create") as limited:
        berth_as(limited)
        response = org.alice.post(URL, job(kind=kind, name=name), format="json")
        assert response.status_code == 201, response.content
        # Embedded: the create ran (and was refused) inside the request.
        assert response.json()["state"] == "rejected"
        job_id = response.json()["id"]

        detail = org.alice.get(f"{URL}{job_id}/").json()
        assert (detail["state"], detail["reason"]) == ("rejected", "Forbidden")
        message = detail["message"]
        # The server's words: who, which verb, which resource in which group.
        assert f'{resource}.{group} "{name}" is forbidden' in message
        assert f'User "{limited.user}" cannot create resource "{resource}"' in message
        assert f'in API group "{group}"' in message
        assert detail["finished_at"] is not None
        assert research.objects(kind) == []  # nothing was made
        stored = JobRequest.objects.get(pk=job_id)
        assert stored.create_attempts == 1

        html = page_of(org, job_id)
        assert 'id="job-rejected"' in html
        assert "Rejected: Forbidden." in html and escape(message) in html

        code, out, err = berth_cli(capsys, "status", name)
        assert code == 0, err
        [state_line] = [line for line in out.splitlines() if line.startswith("State:")]
        assert state_line.split(None, 1)[1] == f"rejected: Forbidden — {message}"

        # The sweeper leaves an ended job alone: it is not tried again.
        JobRequest.objects.filter(pk=job_id).update(
            updated_at=timezone.now() - timedelta(minutes=5)
        )
        assert sweep_jobs() == 0
    assert JobRequest.objects.get(pk=job_id).create_attempts == 1


def test_the_cli_submit_says_at_once_that_the_cluster_refused_the_job(
    org: Org,
    research: EnvtestCluster,
    control_plane: ControlPlane,
    berth_as: UseBerth,
    alice_cli: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with without(control_plane, "JobSet", "create") as limited:
        berth_as(limited)
        code, out, err = berth_cli(
            capsys,
            "submit",
            "--name",
            "cli-jobset",
            "--kind",
            "JobSet",
            "--image",
            "registry.example.com/qwen-trainer:2026.05",
            "--queue",
            "training-large",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--checkpoint",
            "s3://bucket/x",
            "--",
            "python",
            "train.py",
        )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].endswith("state rejected.")
    assert lines[1].startswith("Rejected: Forbidden — apply JobSet research/cli-jobset: 403 ")
    assert 'cannot create resource "jobsets"' in lines[1]


# --- every other cluster call of a create --------------------------------------------------------


def test_a_refused_existence_check_rejects_the_job_too(
    org: Org,
    research: EnvtestCluster,
    control_plane: ControlPlane,
    berth_as: UseBerth,
) -> None:
    """The ``get`` before the create (a retry finds its own object) is refused:
    the job says so instead of the request failing."""
    with without(control_plane, "JobSet", "get") as limited:
        berth_as(limited)
        response = org.alice.post(URL, job(kind="JobSet", name="needs-get"), format="json")
    assert response.status_code == 201, response.content
    stored = JobRequest.objects.get(pk=response.json()["id"])
    assert (stored.state, stored.reason) == (JobState.REJECTED, "Forbidden")
    assert stored.message.startswith("get JobSet needs-get: 403 ")
    assert 'cannot get resource "jobsets"' in stored.message
    assert research.objects("JobSet") == []


def test_a_refused_headless_service_rejects_the_job_before_its_object_is_made(
    org: Org,
    research: EnvtestCluster,
    control_plane: ControlPlane,
    berth_as: UseBerth,
) -> None:
    with limited_identity(control_plane, group="", resource="services", verb="create") as limited:
        berth_as(limited)
        response = org.alice.post(URL, job(kind="Job", name="two-nodes", nodes=2), format="json")
    assert response.status_code == 201, response.content
    stored = JobRequest.objects.get(pk=response.json()["id"])
    assert (stored.state, stored.reason) == (JobState.REJECTED, "Forbidden")
    assert stored.message.startswith("apply Service research/two-nodes: 403 ")
    assert 'cannot create resource "services"' in stored.message
    assert research.objects("Job") == []


def test_a_refused_delete_answers_202_says_why_and_completes_once_allowed(
    org: Org,
    research: EnvtestCluster,
    control_plane: ControlPlane,
    berth_as: UseBerth,
) -> None:
    with without(control_plane, "JobSet", "delete") as limited:
        berth_as(limited)
        created = org.alice.post(URL, job(kind="JobSet", name="keep-me"), format="json")
        assert created.status_code == 201, created.content
        assert created.json()["state"] == "queued"
        job_id = created.json()["id"]

        response = org.alice.delete(f"{URL}{job_id}/")
        assert response.status_code == 202, response.content
        stored = JobRequest.objects.get(pk=job_id)
        # Still on the cluster (it may hold GPUs): not cancelled, and says why.
        assert (stored.state, stored.reason) == (JobState.CANCELLING, "DeleteFailed")
        assert 'cannot delete resource "jobsets"' in stored.message
        assert [j["metadata"]["name"] for j in research.objects("JobSet")] == ["keep-me"]
        assert "Still on the cluster." in page_of(org, job_id)
        # A second cancel is the same cancel, not an error.
        assert org.alice.delete(f"{URL}{job_id}/").status_code == 202

    berth_as(None)  # the operator grants the verb: Berth's own role
    JobRequest.objects.filter(pk=job_id).update(updated_at=timezone.now() - timedelta(minutes=2))
    assert sweep_jobs() == 1
    stored.refresh_from_db()
    assert stored.state == JobState.CANCELLED and stored.cancelled_at is not None
    assert research.objects("JobSet") == []


# --- no cluster configuration at all -------------------------------------------------------------


def test_with_no_cluster_configuration_a_submit_answers_201_and_the_job_says_why(
    org: Org, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with berth_uses(None, settings, monkeypatch, tmp_path / "empty-home"):
        response = org.alice.post(URL, job(kind="JobSet", name="nowhere"), format="json")
        assert response.status_code == 201, response.content
        body = response.json()
        assert (body["state"], body["reason"]) == ("rejected", "ClusterNotConfigured")
        assert body["message"].startswith(
            "Berth cannot reach its cluster: BERTH_CLUSTER=kubernetes"
        )
        assert "KUBECONFIG" in body["message"]
        # A queued job cancelled then: 202, and it says it could not be deleted.
        other = org.alice.post(URL, job(kind="JobSet", name="earlier"), format="json").json()
        JobRequest.objects.filter(pk=other["id"]).update(state=JobState.QUEUED)
        response = org.alice.delete(f"{URL}{other['id']}/")
        assert response.status_code == 202, response.content
    stored = JobRequest.objects.get(pk=other["id"])
    assert (stored.state, stored.reason) == (JobState.CANCELLING, "DeleteFailed")
    assert "no cluster configuration could be loaded" in stored.message
