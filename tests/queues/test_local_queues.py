"""LocalQueues: generated per namespace that may use a ClusterQueue, overridable."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from queues import services
from queues.models import LocalQueue
from tests.factories import cluster_queue, flavor, gpu_groups, team

pytestmark = pytest.mark.django_db


def local_queues() -> set[tuple[str, str, str, bool]]:
    return {
        (lq.namespace.name, lq.name, lq.cluster_queue.name, lq.generated)
        for lq in LocalQueue.objects.select_related("namespace", "cluster_queue")
    }


@pytest.fixture
def two_teams() -> None:
    team("research", namespaces=["research", "research-dev"])
    team("serving")
    flavor("h100")


def test_team_queue_gets_a_local_queue_in_each_team_namespace(two_teams: None) -> None:
    cluster_queue("research", team="research", resource_groups=gpu_groups())
    assert local_queues() == {
        ("research", "research", "research", True),
        ("research-dev", "research", "research", True),
    }


def test_shared_queue_reaches_every_team_namespace(two_teams: None) -> None:
    cluster_queue("urgent", resource_groups=gpu_groups())
    assert {(ns, q) for ns, q, _, _ in local_queues()} == {
        ("research", "urgent"),
        ("research-dev", "urgent"),
        ("serving", "urgent"),
    }


def test_namespace_changes_follow(two_teams: None) -> None:
    cluster_queue("urgent", resource_groups=gpu_groups())
    serving = services.teams.update(
        actor=None, obj=team_obj("serving"), data={"namespaces": ["serving", "serving-eval"]}
    )
    assert serving.namespaces.count() == 2
    assert ("serving-eval", "urgent", "urgent", True) in local_queues()
    services.teams.update(actor=None, obj=team_obj("research"), data={"namespaces": ["research"]})
    assert "research-dev" not in {ns for ns, _, _, _ in local_queues()}


def test_changing_a_queues_team_moves_its_local_queues(two_teams: None) -> None:
    queue = cluster_queue("gpu", team="research", resource_groups=gpu_groups())
    services.cluster_queues.update(actor=None, obj=queue, data={"team": "serving"})
    assert local_queues() == {("serving", "gpu", "gpu", True)}


def test_admin_can_repoint_a_generated_queue_which_then_stays(
    two_teams: None, admin_client: APIClient
) -> None:
    cluster_queue("a", resource_groups=gpu_groups())
    cluster_queue("b", resource_groups=gpu_groups())
    generated = LocalQueue.objects.get(namespace__name="serving", name="a")
    response = admin_client.patch(
        f"/api/v1/local-queues/{generated.pk}/", {"cluster_queue": "b"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["generated"] is False
    # Regeneration (any later policy change) leaves the admin's choice alone.
    cluster_queue("c", resource_groups=gpu_groups())
    assert ("serving", "a", "b", False) in local_queues()


def test_generated_queue_cannot_be_deleted_but_manual_can(
    two_teams: None, admin_client: APIClient
) -> None:
    cluster_queue("a", resource_groups=gpu_groups())
    generated = LocalQueue.objects.get(namespace__name="serving", name="a")
    refused = admin_client.delete(f"/api/v1/local-queues/{generated.pk}/")
    assert refused.status_code == 409
    assert refused.json()["rule"] == "generated"
    created = admin_client.post(
        "/api/v1/local-queues/",
        {"namespace": "serving", "name": "extra", "cluster_queue": "a"},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert admin_client.delete(f"/api/v1/local-queues/{created.json()['id']}/").status_code == 204


def test_queue_with_a_manual_local_queue_cannot_be_deleted(
    two_teams: None, admin_client: APIClient
) -> None:
    cluster_queue("a", resource_groups=gpu_groups())
    admin_client.post(
        "/api/v1/local-queues/",
        {"namespace": "serving", "name": "extra", "cluster_queue": "a"},
        format="json",
    )
    before = local_queues()
    refused = admin_client.delete("/api/v1/cluster-queues/a/")
    assert refused.status_code == 409
    assert refused.json()["references"] == {"local_queues": ["serving/extra"]}
    assert local_queues() == before


def test_team_with_queues_cannot_be_deleted_and_empty_team_can(
    two_teams: None, admin_client: APIClient
) -> None:
    cluster_queue("r", team="research", resource_groups=gpu_groups())
    refused = admin_client.delete("/api/v1/teams/research/")
    assert refused.status_code == 409
    assert refused.json()["references"] == {"cluster_queues": ["r"]}
    cluster_queue("shared", resource_groups=gpu_groups())
    assert admin_client.delete("/api/v1/teams/serving/").status_code == 204
    assert "serving" not in {ns for ns, _, _, _ in local_queues()}


def team_obj(slug: str):  # type: ignore[no-untyped-def]
    from queues.models import Team

    return Team.objects.get(slug=slug)
