"""An organisation to submit jobs into: two teams, on-demand and spot H100s,
one queue per queue class, and a member client per team."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from queues import services
from tests.factories import cluster_queue, cohort, flavor, team, token_client, user

GPU = "nvidia.com/gpu"
SPOT_TAINT = {"key": "capacity", "value": "spot", "effect": "NoSchedule"}


def gpus(*flavors: tuple[str, str], **limits: str) -> list[dict[str, Any]]:
    return [
        {
            "covered_resources": [GPU],
            "flavors": [
                {"name": name, "resources": [{"name": GPU, "nominal_quota": nominal, **limits}]}
                for name, nominal in flavors
            ],
        }
    ]


@dataclass
class Org:
    alice: APIClient  # member of research
    bob: APIClient  # member of serving
    admin: APIClient
    users: dict[str, Any]


@pytest.fixture
def org(db: Any, queue_class_templates: None, settings: Any) -> Org:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    flavor("h100", node_labels={"gpu": "h100", "capacity": "on-demand"})
    flavor(
        "h100-spot",
        node_labels={"gpu": "h100", "capacity": "spot"},
        node_taints=[SPOT_TAINT],
        capacity_type="spot",
    )
    cohort("org")
    research, serving = team("research", ["research"]), team("serving", ["serving"])
    services.priority_classes.create(actor=None, data={"name": "train-high", "value": 100000})
    services.priority_classes.create(actor=None, data={"name": "train-low", "value": 1000})
    cluster_queue(
        "research",
        team="research",
        cohort="org",
        queue_class="training-large",
        resource_groups=gpus(("h100", "16"), borrowing_limit="8"),
    )
    cluster_queue(
        "research-eval",
        team="research",
        cohort="org",
        queue_class="eval-batch",
        resource_groups=gpus(("h100", "0"), ("h100-spot", "8")),
    )
    cluster_queue(
        "research-dev",
        team="research",
        cohort="org",
        queue_class="interactive-dev",
        resource_groups=gpus(("h100", "8")),
    )
    cluster_queue(
        "serving",
        team="serving",
        cohort="org",
        queue_class="training-large",
        resource_groups=gpus(("h100", "16")),
    )
    cluster_queue(
        "urgent",
        cohort="org",
        queue_class="urgent-release",
        resource_groups=gpus(("h100", "8")),
    )
    people = {"alice": user("alice"), "bob": user("bob"), "admin": user("root", superuser=True)}
    services.set_membership(
        actor=None, team=research, username="alice", role="member", present=True
    )
    services.set_membership(actor=None, team=serving, username="bob", role="member", present=True)
    return Org(
        alice=token_client(people["alice"]),
        bob=token_client(people["bob"]),
        admin=token_client(people["admin"]),
        users=people,
    )


def job(**overrides: Any) -> dict[str, Any]:
    """A valid request for the research team's training-large queue."""
    body: dict[str, Any] = {
        "name": "qwen-sft",
        "image": "registry.example.com/qwen-trainer:2026.05",
        "queue": "training-large",
        "nodes": 2,
        "gpus_per_node": 8,
        "priority_class": "train-low",
        "checkpoint_uri": "s3://bucket/qwen-sft",
        "command": ["python", "train.py", "--config", "configs/qwen-sft.yaml"],
    }
    body.update(overrides)
    return body
