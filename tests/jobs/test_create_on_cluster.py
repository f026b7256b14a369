"""Creating and deleting a job's objects through either backend — the
simulated one, and the real kubernetes client over HTTP against the loopback
API-server double — exactly once, however often the task runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobs.models import JobRequest, JobState
from jobs.services import cancel, create_on_cluster, delete_from_cluster
from tests.jobs.conftest import Org, job
from tests.reconcile.clusters import ClusterUnderTest, SimulatedCluster

URL = "/api/v1/jobs/"


@pytest.fixture(params=["simulated", "kubernetes"])
def cluster(request: pytest.FixtureRequest, org: Org) -> Iterator[ClusterUnderTest]:
    if request.param == "simulated":
        yield SimulatedCluster()
        return
    from tests.reconcile.kube_cluster import KubeCluster

    with KubeCluster() as kube:
        kube.add_foreign(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}}
        )
        yield kube


def submitted(org: Org, **overrides: Any) -> JobRequest:
    response = org.alice.post(URL, job(**overrides), format="json")
    assert response.status_code == 201, response.content
    return JobRequest.objects.get(pk=response.json()["id"])


def test_a_multi_node_batch_job_is_created_with_its_headless_service_once(
    org: Org, cluster: ClusterUnderTest
) -> None:
    stored = submitted(org, nodes=2)
    kinds = [obj["kind"] for obj in stored.manifest]
    assert kinds[0] == "Job" and "Service" in kinds
    before = cluster.writes()
    assert create_on_cluster(cluster.backend, stored.pk) == "created"
    created_writes = cluster.writes() - before
    JobRequest.objects.filter(pk=stored.pk).update(state=JobState.SUBMITTED)  # a redelivery
    assert create_on_cluster(cluster.backend, stored.pk) == "exists"
    assert cluster.writes() - before == created_writes  # the retry wrote nothing
    [made] = cluster.objects("Job")
    assert made["metadata"]["name"] == "qwen-sft" and made["spec"]["suspend"] is True
    assert made["metadata"]["annotations"]["berth.dev/job-request"] == str(stored.pk)
    assert [s["metadata"]["name"] for s in cluster.objects("Service")] == ["qwen-sft"]
    stored.refresh_from_db()
    assert stored.state == JobState.QUEUED and stored.cluster_uid


def test_cancel_deletes_the_job_and_its_service(org: Org, cluster: ClusterUnderTest) -> None:
    stored = submitted(org, nodes=2)
    create_on_cluster(cluster.backend, stored.pk)
    stored.refresh_from_db()
    cancel(None, stored)
    assert delete_from_cluster(cluster.backend, stored.pk) == "deleted"
    assert cluster.objects("Job") == [] and cluster.objects("Service") == []
    assert JobRequest.objects.get(pk=stored.pk).state == JobState.CANCELLED
