"""The demo organisation: built by `seed_demo`, idempotent, and visible through the API."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command

from queues import services
from queues.choices import CapacityType
from queues.models import (
    ClusterQueue,
    LocalQueue,
    PolicyChange,
    QueueClass,
    Quota,
    ResourceFlavor,
    Team,
)
from queues.quantity import to_canonical
from tests.factories import GPU, token_client

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_builds_the_demo_organisation() -> None:
    output = seed()
    assert "Demo organisation ready (13 object(s) and 6 user(s) created" in output
    assert "  topology gpu-racks: created" in output
    assert "admin     password admin-demo" in output
    gpus: dict[str, int] = {}
    for quota in Quota.objects.filter(resource=GPU).select_related("flavor"):
        gpus[quota.flavor.name] = gpus.get(quota.flavor.name, 0) + quota.nominal_quota
    assert gpus == {"h100-ondemand": 48, "h100-spot": 16}
    # Priced, so the usage page of a fresh `make run` shows costs, not "unpriced".
    prices = dict(ResourceFlavor.objects.values_list("name", "gpu_hour_price"))
    assert {name: str(price) for name, price in prices.items()} == {
        "h100-ondemand": "3.9000",
        "h100-spot": "1.6000",
    }
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
        {"name": "cpu", "nominal_quota": "576", "borrowing_limit": "384"},
        {"name": "memory", "nominal_quota": "6Ti", "borrowing_limit": "4Ti"},
        {"name": GPU, "nominal_quota": "24", "borrowing_limit": "16"},
    ]
    assert {name: guaranteed_and_borrowable(q) for name, q in queues.items()} == {
        "research": (24, 16),
        "serving": (24, 16),
        "platform": (8, 8),
        "urgent-release": (8, 0),
    }
    assert queues["urgent-release"]["queue_class"] == "urgent-release"
    assert queues["research"]["queueing_strategy"] == "StrictFIFO"  # from training-large


def test_every_quota_is_on_a_flavor_its_queue_class_may_use() -> None:
    """Spot capacity only where the queue class runs on spot: a queue promised
    GPUs its own jobs are refused would look generous and admit nothing."""
    seed()
    misplaced = [
        (quota.cluster_queue.name, quota.flavor.name)
        for quota in Quota.objects.filter(cluster_queue__isnull=False).select_related(
            "flavor", "cluster_queue__queue_class"
        )
        if quota.flavor.capacity_type == CapacityType.SPOT
        and (quota.nominal_quota or quota.borrowing_limit)
        and not quota.cluster_queue.queue_class.spot_allowed
    ]
    assert misplaced == []


@pytest.mark.parametrize(
    ("username", "body"),
    [
        ("alice", {"queue": "training-large", "nodes": 2, "gpus_per_node": 8}),
        ("bob", {"queue": "eval-batch", "nodes": 1, "gpus_per_node": 8}),
        ("bob", {"queue": "eval-batch", "nodes": 1, "gpus_per_node": 8, "spot_allowed": False}),
        ("carol", {"queue": "interactive-dev", "nodes": 1, "gpus_per_node": 8}),
    ],
)
def test_each_team_can_use_what_its_queue_guarantees(username: str, body: dict[str, Any]) -> None:
    """On an empty cluster, a job of each demo team's own queue class fits now
    within its queue's own guaranteed GPUs (no borrowing): they are GPUs its
    jobs can run on."""
    seed()
    client = token_client(get_user_model().objects.get(username=username))
    request = {
        "name": "fits",
        "image": "registry.example.com/trainer:1",
        "checkpoint_uri": "s3://bucket/fits",
        "command": ["python", "train.py"],
        **body,
    }
    answer = client.post("/api/v1/jobs/?dry_run=true", request, format="json")
    assert answer.status_code == 200, answer.content
    plan = answer.json()
    assert plan["fits_now"] is True, plan
    [flavor] = {resources[GPU] for resources in plan["flavors"].values()}
    guaranteed = Quota.objects.get(
        cluster_queue__name=plan["cluster_queue"], flavor__name=flavor, resource=GPU
    ).nominal_quota
    assert guaranteed >= body["nodes"] * body["gpus_per_node"], (plan["cluster_queue"], flavor)


def test_the_demo_day_scenario_has_the_demo_organisations_quotas_and_spot_rules() -> None:
    """scenarios/demo-day.yaml replays the demo organisation: the same GPU quota
    per queue and flavor, and spot tolerated only where the queue class runs on spot."""
    from queues import demo_org
    from queues.queue_class_templates import QUEUE_CLASS_TEMPLATES

    def gpus(value: Any) -> int:
        return to_canonical(GPU, str(value)) if value is not None else 0

    scenario = yaml.safe_load((ROOT / "scenarios" / "demo-day.yaml").read_text())
    in_scenario = {
        (queue["name"], flavor["name"]): (gpus(r["nominalQuota"]), gpus(r.get("borrowingLimit")))
        for queue in scenario["clusterQueues"]
        for group in queue["resourceGroups"]
        for flavor in group["flavors"]
        for r in flavor["resources"]
        if r["name"] == GPU
    }
    in_demo = {
        (queue["name"], flavor["name"]): (gpus(r["nominal_quota"]), gpus(r.get("borrowing_limit")))
        for queue in demo_org.CLUSTER_QUEUES
        for group in queue["resource_groups"]
        for flavor in group["flavors"]
        for r in flavor["resources"]
        if r["name"] == GPU
    }
    assert in_scenario == in_demo
    spot_classes = {t["name"] for t in QUEUE_CLASS_TEMPLATES if t["spot_allowed"]}
    spot_queues = {q["name"] for q in demo_org.CLUSTER_QUEUES if q["queue_class"] in spot_classes}
    for workload_class in scenario["generate"]["classes"]:
        tolerates = any(p.get("tolerations") for p in workload_class["podSets"])
        assert tolerates == bool(set(workload_class["clusterQueues"]) & spot_queues), (
            workload_class["name"]
        )
