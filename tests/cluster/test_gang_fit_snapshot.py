"""Sync's snapshot step writes the gang-fit snapshot with the capacity
snapshot, on the nodes it has just recorded and the placements sync keeps; a
cluster without a topology-aware flavor gets none."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from cluster.models import CapacitySnapshot, GangFitSnapshot, ObservedNode
from cluster.snapshots import snapshot_cluster
from queues.backends.simulated import SimulatedBackend
from queues.reconcile import reconcile
from queues.simulation.nodes import ensure_nodes
from tests.jobs.conftest import Org, org
from tests.jobs.test_explain_gang_fit import running_on
from tests.jobs.test_topology_requests import racked

__all__ = ["org"]  # the fixture, used by name


def test_the_snapshot_step_records_gang_fit_with_capacity(org: Org) -> None:
    racked(org)
    node = ObservedNode.objects.filter(name__startswith="sim-h100-0").order_by("name").first()
    assert node is not None
    running_on(node.name, "svc", 6)
    at = timezone.now().replace(microsecond=0)
    snapshot_cluster(SimulatedBackend(), at)
    assert CapacitySnapshot.objects.filter(at=at, flavor="h100").exists()
    [row] = GangFitSnapshot.objects.filter(at=at)
    assert (row.flavor, row.free_gpus, row.whole_free_nodes, row.stranded_gpus) == (
        "h100",
        42,
        5,
        2,
    )


def test_no_topology_aware_flavor_no_gang_fit_snapshot(org: Org, settings: Any) -> None:
    backend = SimulatedBackend()
    assert reconcile(backend).status == "succeeded"
    ensure_nodes(backend)
    at = timezone.now().replace(microsecond=0)
    snapshot_cluster(backend, at)
    assert CapacitySnapshot.objects.filter(at=at).exists()
    assert not GangFitSnapshot.objects.exists()
