"""A team asks for its gang in one rack: the dry run and `berth why` place it
on the nodes sync saw, by the flavor's Topology, and say why it waits when the
quota has room but no rack does."""

from __future__ import annotations

from typing import Any

from cluster.snapshots import record_nodes
from queues import services
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import ResourceFlavor
from queues.reconcile import reconcile
from queues.simulation.nodes import ensure_nodes
from tests.factories import topology
from tests.jobs.conftest import Org, job

URL = "/api/v1/jobs/"
RACK = "topology.berth.dev/rack"


def racked(org: Org) -> None:
    """The org's h100 flavor topology-aware, its simulated nodes synced: its
    32 GPUs of nominal quota make 4 nodes, one rack."""
    topology()
    services.resource_flavors.update(
        actor=None,
        obj=ResourceFlavor.objects.get(name="h100"),
        data={"topology_name": "gpu-racks"},
    )
    backend = SimulatedBackend()
    run = reconcile(backend)
    assert run.status == "succeeded", run.errors
    ensure_nodes(backend)
    from django.utils import timezone

    record_nodes(backend.list(TYPES["Node"])[0], timezone.now())


def test_a_gang_that_fits_the_quota_but_not_the_free_nodes_says_why(org: Org) -> None:
    """Four nodes of 8 GPUs, one rack. Serving runs 4 GPUs on one node; research
    asks for 4 nodes of 6 GPUs in one rack: the quota has room, the nodes have
    room for 3 of those pods."""
    from tests.jobs.test_lifecycle import admitted_workload

    racked(org)
    admitted_workload("serving", "svc", gpus=4, flavor="h100", runtime=3600)
    fits: Any = org.alice.post(
        URL + "?dry_run=true",
        job(nodes=3, gpus_per_node=6, topology_required=RACK),
        format="json",
    ).json()
    assert fits["fits_now"] is True, fits
    too_wide: Any = org.alice.post(
        URL + "?dry_run=true",
        job(nodes=4, gpus_per_node=6, topology_required=RACK),
        format="json",
    ).json()
    assert too_wide["fits_now"] is False, too_wide
    message = too_wide["explanation"]["message"]
    assert "the quota has room, but its pods find no place together" in message, message
    assert 'topology "gpu-racks" allows to fit only 3 out of 4 pod(s)' in message, message
    # The manifest asks Kueue for the same.
    template = too_wide["manifest"][0]["spec"]["template"]
    assert template["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": RACK}


def test_estimates_start_from_the_local_queues_usage_kueue_reported(org: Org) -> None:
    """Admission fair sharing on research's ClusterQueue: the engine's ledger
    for dry runs and estimates starts from each LocalQueue's consumed usage as
    sync mirrored it from the cluster, not from zero."""
    from django.utils import timezone

    from cluster.models import QueueStatus
    from cluster.state import cluster_state
    from queues.models import ClusterQueue

    services.kueue_configuration.update(
        actor=None,
        data={
            "fairSharing": {"enable": False},
            "admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m"},
        },
    )
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"admission_mode": "UsageBasedAdmissionFairSharing"},
    )
    QueueStatus.objects.create(
        kind="LocalQueue",
        namespace="research",
        name="research",
        cluster_queue="research",
        status={
            "fairSharing": {
                "admissionFairSharingStatus": {
                    "consumedResources": {"nvidia.com/gpu": "6", "cpu": "1500m"}
                }
            }
        },
        observed_at=timezone.now(),
    )
    state = cluster_state()
    ledger = state.scheduler.ledger
    assert ledger is not None
    assert ledger.consumed["research/research"] == {"nvidia.com/gpu": 6.0, "cpu": 1.5}
    assert ledger.usage("research/research") == 7.5
