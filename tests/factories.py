"""Builders for test data. They go through the services, like the API does, so
test data obeys the same rules as real data."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from accounts.roles import APPROVERS_GROUP
from accounts.services import create_token
from queues import services
from queues.models import ClusterQueue, Cohort, ResourceFlavor, Team, Topology

GPU = "nvidia.com/gpu"


def user(username: str, *, superuser: bool = False) -> Any:
    return get_user_model().objects.create_user(
        username=username,
        password=f"{username}-password",
        is_superuser=superuser,
        is_staff=superuser,
    )


def team(slug: str, namespaces: list[str] | None = None) -> Team:
    data: dict[str, Any] = {"slug": slug, "name": slug.title()}
    if namespaces is not None:
        data["namespaces"] = namespaces
    return services.teams.create(actor=None, data=data)


def role_users() -> dict[str, Any]:
    """admin, member_a (team alpha), member_b (team beta), approver (approver of
    alpha), global_approver (group approvers), anonymous (None)."""
    alpha, beta = team("alpha"), team("beta")
    people = {
        "admin": user("admin", superuser=True),
        "member_a": user("member-a"),
        "member_b": user("member-b"),
        "approver": user("approver-a"),
        "global_approver": user("global-approver"),
    }
    services.set_membership(
        actor=None, team=alpha, username="member-a", role="member", present=True
    )
    services.set_membership(actor=None, team=beta, username="member-b", role="member", present=True)
    services.set_membership(
        actor=None, team=alpha, username="approver-a", role="approver", present=True
    )
    group, _ = Group.objects.get_or_create(name=APPROVERS_GROUP)
    people["global_approver"].groups.add(group)
    people["anonymous"] = None
    return people


def token_client(owner: Any) -> APIClient:
    client = APIClient()
    if owner is not None:
        secret = create_token(user=owner, name="tests").secret
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


RACK_LEVELS = ["topology.berth.dev/block", "topology.berth.dev/rack", "kubernetes.io/hostname"]


def topology(name: str = "gpu-racks", **data: Any) -> Topology:
    return services.topologies.create(
        actor=None, data={"name": name, "levels": list(RACK_LEVELS), **data}
    )


def flavor(name: str = "h100", **data: Any) -> ResourceFlavor:
    return services.resource_flavors.create(actor=None, data={"name": name, **data})


def cohort(name: str = "shared", **data: Any) -> Cohort:
    return services.cohorts.create(actor=None, data={"name": name, **data})


def gpu_groups(
    flavor_name: str = "h100", nominal: str = "8", **limits: str
) -> list[dict[str, Any]]:
    """One resource group covering only GPUs, in one flavor."""
    return [
        {
            "covered_resources": [GPU],
            "flavors": [
                {
                    "name": flavor_name,
                    "resources": [{"name": GPU, "nominal_quota": nominal, **limits}],
                }
            ],
        }
    ]


def cluster_queue(name: str = "q", **data: Any) -> ClusterQueue:
    return services.cluster_queues.create(actor=None, data={"name": name, **data})
