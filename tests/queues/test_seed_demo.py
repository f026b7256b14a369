"""The demo organisation: built by `seed_demo`, idempotent, and visible through the API."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from queues import services
from queues.models import ClusterQueue, LocalQueue, PolicyChange, QueueClass, Quota, Team
from queues.quantity import to_canonical
from tests.factories import GPU, token_client

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_builds_the_demo_organisation() -> None:
    output = seed()
    assert "Demo organisation ready (12 object(s) and 6 user(s) created" in output
    assert "admin     password admin-demo" in output
    gpus: dict[str, int] = {}
    for quota in Quota.objects.filter(resource=GPU).select_related("flavor"):
        gpus[quota.flavor.name] = gpus.get(quota.flavor.name, 0) + quota.nominal_quota
    assert gpus == {"h100-ondemand": 48, "h100-spot": 16}
    by_queue = {q.name: q for q in ClusterQueue.objects.select_related("team", "cohort")}
    assert {name: (q.team.slug if q.team else None) for name, q in by_queue.items()} == {
        "research": "research",
        "serving": "serving",
        "platform": "platform",
        "urgent-release": None,
    }
    assert {q.cohort.name for q in by_queue.values() if q.cohort} == {"ai-shared"}
    # The shared urgent queue is reachable from every team namespace.
    assert set(
        LocalQueue.objects.filter(name="urgent-release").values_list("namespace__name", flat=True)
    ) == {"research", "serving", "platform"}


def counts() -> tuple[int, ...]:
    return (
        ClusterQueue.objects.count(),
        Quota.objects.count(),
        LocalQueue.objects.count(),
        PolicyChange.objects.count(),
    )


def test_seed_is_idempotent_and_leaves_later_changes_alone() -> None:
    seed()
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("a-new-secret")
    admin.save()
    research = Team.objects.get(slug="research")
    services.set_membership(
        actor=admin, team=research, username="alice", role="member", present=False
    )
    services.queue_classes.update(
        actor=admin,
        obj=QueueClass.objects.get(name="eval-batch"),
        data={"default_priority_class": None},
    )
    before = counts()

    output = seed()
    assert "(0 object(s) and 0 user(s) created" in output
    assert "admin     password (unchanged)" in output
    assert counts() == before
    admin.refresh_from_db()
    assert admin.check_password("a-new-secret")
    assert not research.memberships.filter(user__username="alice").exists()
    assert QueueClass.objects.get(name="eval-batch").default_priority_class is None


def guaranteed_and_borrowable(queue: dict[str, Any]) -> tuple[int, int]:
    nominal = borrow = 0
    for group in queue["resource_groups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == GPU:
                    nominal += to_canonical(GPU, resource["nominal_quota"])
                    borrow += to_canonical(GPU, resource.get("borrowing_limit", "0"))
    return nominal, borrow


def test_cluster_queues_api_shows_quotas_in_kubernetes_notation() -> None:
    seed()
    client = token_client(get_user_model().objects.get(username="alice"))
    response = client.get("/api/v1/cluster-queues/")
    assert response.status_code == 200
    queues = {q["name"]: q for q in response.json()["results"]}
    research = queues["research"]["resource_groups"][0]
    assert research["covered_resources"] == ["cpu", "memory", GPU]
    ondemand = research["flavors"][0]
    assert ondemand["name"] == "h100-ondemand"
    assert ondemand["resources"] == [
        {"name": "cpu", "nominal_quota": "576", "borrowing_limit": "192"},
        {"name": "memory", "nominal_quota": "6Ti", "borrowing_limit": "2Ti"},
        {"name": GPU, "nominal_quota": "24", "borrowing_limit": "8"},
    ]
    assert {name: guaranteed_and_borrowable(q) for name, q in queues.items()} == {
        "research": (32, 16),
        "serving": (16, 16),
        "platform": (8, 24),
        "urgent-release": (8, 0),
    }
    assert queues["urgent-release"]["queue_class"] == "urgent-release"
    assert queues["research"]["queueing_strategy"] == "StrictFIFO"  # from training-large
