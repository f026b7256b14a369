"""An approved grant reaches the cluster through reconcile (the policy write's
on-commit hook; with no broker the task runs eagerly), and its revert does
too: the simulated cluster's ClusterQueue holds the granted quota, then the
old one again."""

from __future__ import annotations

from typing import Any

import pytest

from grants import lifecycle
from grants.services import request_grant
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import ReconcileRun
from tests.grants.conftest import ask
from tests.jobs.conftest import Org

pytestmark = pytest.mark.django_db(transaction=True)
GPU = "nvidia.com/gpu"


def on_cluster(name: str) -> str:
    """The h100 GPU nominal quota of ClusterQueue ``name`` on the simulated cluster."""
    queues = {o["metadata"]["name"]: o for o in SimulatedBackend().list(TYPES["ClusterQueue"])[0]}
    for group in queues[name]["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if flavor["name"] == "h100" and resource["name"] == GPU:
                    return str(resource["nominalQuota"])
    raise AssertionError(f"{name} has no h100 GPU quota on the cluster")


def test_the_grant_and_its_revert_reach_the_cluster(org: Org, carol: Any, settings: Any) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = True
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    grant = request_grant(org.users["alice"], ask())
    before = ReconcileRun.objects.count()
    lifecycle.approve(carol, grant.pk)
    assert ReconcileRun.objects.count() == before + 1
    assert on_cluster("research") == "32"
    lifecycle.revert_ended(grant.ends_at)
    assert ReconcileRun.objects.count() == before + 2
    assert on_cluster("research") == "16"
