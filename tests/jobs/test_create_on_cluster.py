"""Creating and deleting a job's objects through either backend — the simulated
one, and a real kube-apiserver with the CRDs of JobSet, the training operator
and Kubeflow Trainer installed, reached as Berth's ServiceAccount — exactly
once, however often the task runs. On the real server every kind passes the
schema, CEL rules and RBAC for real."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobs.models import JobRequest, JobState
from jobs.services import cancel, create_on_cluster, delete_from_cluster
from tests.jobs.conftest import Org, job
from tests.reconcile.clusters import ClusterUnderTest, SimulatedCluster

URL = "/api/v1/jobs/"
KINDS = ("Job", "JobSet", "PyTorchJob", "TrainJob")


@pytest.fixture(params=["simulated", "kubernetes"])
def cluster(request: pytest.FixtureRequest, org: Org) -> Iterator[ClusterUnderTest]:
    if request.param == "simulated":
        yield SimulatedCluster()
        return
    kube = request.getfixturevalue("kube")
    kube.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    yield kube


def submitted(org: Org, **overrides: Any) -> JobRequest:
    response = org.alice.post(URL, job(**overrides), format="json")
    assert response.status_code == 201, response.content
    return JobRequest.objects.get(pk=response.json()["id"])


def services(cluster: ClusterUnderTest) -> list[dict[str, Any]]:
    """The team's Services (a real server also has ``default/kubernetes``)."""
    return [s for s in cluster.objects("Service") if s["metadata"]["namespace"] == "research"]


def suspended(obj: dict[str, Any]) -> bool:
    """Each kind's own suspend field (Kueue unsuspends it on admission)."""
    spec = obj["spec"]
    if obj["kind"] == "PyTorchJob":
        return bool(spec["runPolicy"]["suspend"])
    return bool(spec["suspend"])


def test_a_multi_node_batch_job_is_created_with_its_headless_service_once(
    org: Org, cluster: ClusterUnderTest
) -> None:
    stored = submitted(org, nodes=2)
    kinds = [obj["kind"] for obj in stored.manifest]
    assert kinds[0] == "Job" and "Service" in kinds
    before = cluster.writes()
    assert create_on_cluster(cluster.backend, stored.pk) == "created"
    created_writes = cluster.writes() - before
    assert created_writes == 2  # the Service, then the Job
    JobRequest.objects.filter(pk=stored.pk).update(state=JobState.SUBMITTED)  # a redelivery
    assert create_on_cluster(cluster.backend, stored.pk) == "exists"
    assert cluster.writes() - before == created_writes  # the retry wrote nothing
    [made] = cluster.objects("Job")
    assert made["metadata"]["name"] == "qwen-sft" and made["spec"]["suspend"] is True
    assert made["metadata"]["annotations"]["berth.dev/job-request"] == str(stored.pk)
    assert [s["metadata"]["name"] for s in services(cluster)] == ["qwen-sft"]
    stored.refresh_from_db()
    assert stored.state == JobState.QUEUED and stored.cluster_uid == made["metadata"]["uid"]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_created_suspended_in_its_queue(
    org: Org, cluster: ClusterUnderTest, kind: str
) -> None:
    stored = submitted(org, kind=kind, name=f"sft-{kind.lower()}", nodes=2)
    assert create_on_cluster(cluster.backend, stored.pk) == "created", stored.message
    [made] = cluster.objects(kind)
    assert made["metadata"]["name"] == stored.name and suspended(made)
    labels = made["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == stored.local_queue
    assert labels["kueue.x-k8s.io/priority-class"] == "train-low"
    stored.refresh_from_db()
    assert (stored.state, stored.cluster_uid) == (JobState.QUEUED, made["metadata"]["uid"])


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_deletes_the_job_and_its_service(
    org: Org, cluster: ClusterUnderTest, kind: str
) -> None:
    stored = submitted(org, kind=kind, name=f"sft-{kind.lower()}", nodes=2)
    assert create_on_cluster(cluster.backend, stored.pk) == "created", stored.message
    stored.refresh_from_db()
    cancel(None, stored)
    assert delete_from_cluster(cluster.backend, stored.pk) == "deleted"
    assert cluster.objects(kind) == [] and services(cluster) == []
    assert JobRequest.objects.get(pk=stored.pk).state == JobState.CANCELLED
    # A redelivered delete finds nothing left to do.
    assert delete_from_cluster(cluster.backend, stored.pk) == "skipped"
