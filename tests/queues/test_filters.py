"""Listing the policy: filters shared with the dashboard, ordering and pagination."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from queues import services
from tests.factories import cluster_queue, cohort, flavor, gpu_groups

pytestmark = pytest.mark.django_db


def names(client: APIClient, path: str, **params: str) -> list[str]:
    response = client.get(path, params)
    assert response.status_code == 200, response.content
    return [item.get("slug") or item["name"] for item in response.json()["results"]]


@pytest.fixture
def policy(users: dict[str, object]) -> None:
    flavor("h100")
    flavor("h100-spot", capacity_type="spot")
    cohort("root")
    cohort("child", parent="root")
    cluster_queue(
        "alpha-train",
        team="alpha",
        cohort="child",
        queue_class="training-large",
        resource_groups=gpu_groups("h100"),
    )
    cluster_queue("beta-eval", team="beta", resource_groups=gpu_groups("h100-spot"))
    cluster_queue("urgent", queue_class="urgent-release", resource_groups=gpu_groups("h100"))


def test_cluster_queue_filters(policy: None, clients: dict[str, APIClient]) -> None:
    client = clients["member_b"]
    path = "/api/v1/cluster-queues/"
    assert names(client, path, team="alpha") == ["alpha-train"]
    assert names(client, path, shared="true") == ["urgent"]
    assert names(client, path, flavor="h100") == ["alpha-train", "urgent"]
    assert names(client, path, cohort="child") == ["alpha-train"]
    assert names(client, path, queue_class="urgent-release") == ["urgent"]
    assert names(client, path, queueing_strategy="StrictFIFO") == ["alpha-train"]
    assert names(client, path, ordering="-name") == ["urgent", "beta-eval", "alpha-train"]


def test_other_filters(policy: None, clients: dict[str, APIClient]) -> None:
    client = clients["member_a"]
    assert names(client, "/api/v1/resource-flavors/", capacity_type="spot") == ["h100-spot"]
    assert names(client, "/api/v1/cohorts/", root="true") == ["root"]
    assert names(client, "/api/v1/cohorts/", parent="root") == ["child"]
    assert names(client, "/api/v1/teams/", namespace="beta") == ["beta"]
    assert names(client, "/api/v1/local-queues/", namespace="alpha", cluster_queue="urgent") == [
        "urgent"
    ]
    assert names(client, "/api/v1/queue-classes/", requires_approval="true") == ["urgent-release"]


def test_pagination(users: dict[str, object], clients: dict[str, APIClient]) -> None:
    for value in range(7):
        services.priority_classes.create(actor=None, data={"name": f"p{value}", "value": value})
    first = clients["member_a"].get("/api/v1/priority-classes/", {"page_size": 5}).json()
    assert first["count"] == 7 and len(first["results"]) == 5 and first["next"]
    second = clients["member_a"].get(first["next"]).json()
    assert [p["name"] for p in second["results"]] == ["p1", "p0"]  # highest value first
    largest = clients["member_a"].get("/api/v1/priority-classes/", {"page_size": 500}).json()
    assert len(largest["results"]) == 7
    too_large = clients["member_a"].get("/api/v1/priority-classes/", {"page_size": 10_000})
    assert too_large.status_code == 400  # the schema's maximum: said, not silently capped
    assert "at most 500" in too_large.json()["errors"][0]["message"]


def test_listing_costs_the_same_queries_for_many_queues(
    policy: None, clients: dict[str, APIClient], django_assert_max_num_queries: Any
) -> None:
    client = clients["member_a"]
    client.get("/api/v1/cluster-queues/")  # warm the token's last-used stamp
    with django_assert_max_num_queries(8):
        assert len(names(client, "/api/v1/cluster-queues/")) == 3
    for index in range(10):
        cluster_queue(f"extra-{index}", resource_groups=gpu_groups("h100"))
    with django_assert_max_num_queries(8):
        assert len(names(client, "/api/v1/cluster-queues/")) == 13
