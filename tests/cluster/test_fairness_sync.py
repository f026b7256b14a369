"""Fair shares from what sync really records, on the simulated cluster and a
real kube-apiserver: a workload that waits in research's queue while vision
borrows research's quota, then is admitted; the queue snapshots sync takes
and the events it writes give research nothing of the 8 GPUs it deserved
while it waited, and no waiting once admitted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from cluster.fairness import evaluate, waiting_gpus_now
from cluster.models import WorkloadRecord, WorkloadState
from cluster.snapshots import snapshot_queues
from cluster.sync import sync_workloads
from tests.cluster.test_sync import KUEUE, condition, workload
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team
from tests.reconcile.clusters import ClusterUnderTest

GPU = "nvidia.com/gpu"


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "shared",
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": "h100", "resources": [{"name": GPU, "nominalQuota": "16"}]}
                    ],
                }
            ],
        },
    }


def usage(total: int, pending: int) -> dict[str, Any]:
    return {
        "pendingWorkloads": pending,
        "admittedWorkloads": 1,
        "flavorsReservation": [
            {
                "name": "h100",
                "resources": [
                    {"name": GPU, "total": str(total), "borrowed": str(max(0, total - 16))}
                ],
            }
        ],
    }


def test_a_team_waiting_while_its_quota_is_borrowed_gets_nothing_of_its_share(
    cluster: ClusterUnderTest,
) -> None:
    flavor("h100")
    cohort("shared")
    team("research", namespaces=["research"])
    team("vision", namespaces=["vision"])
    cluster_queue(
        "research", team="research", cohort="shared", resource_groups=gpu_groups("h100", "16")
    )
    cluster_queue(
        "vision", team="vision", cohort="shared", resource_groups=gpu_groups("h100", "16")
    )
    cluster.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    cluster.add_foreign(queue("research"))
    cluster.add_foreign(queue("vision"))

    cluster.add_foreign(workload("job-train", gpus=8, pods=1))
    sync_workloads(cluster.backend)
    record = WorkloadRecord.objects.get(name="job-train")
    assert (record.state, record.cluster_queue) == (WorkloadState.PENDING, "research")
    created = record.created_at

    # Every five minutes for 40 minutes: research waits, vision holds 32.
    cluster.set_status("ClusterQueue", "research", usage(0, 1))
    cluster.set_status("ClusterQueue", "vision", usage(32, 0))
    for minute in range(0, 40, 5):
        snapshot_queues(cluster.backend, created + timedelta(minutes=minute))

    # Admitted at minute 40; snapshots on to minute 60.
    admitted = (created + timedelta(minutes=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "admission": {
            "clusterQueue": "research",
            "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {GPU: "h100"}, "resourceUsage": {GPU: "8"}}
            ],
        },
        "conditions": [
            condition("QuotaReserved", True, "QuotaReserved", admitted, "Quota reserved"),
            condition("Admitted", True, "Admitted", admitted, "The workload is admitted"),
        ],
    }
    cluster.set_status("Workload", "job-train", status, namespace="research")
    sync_workloads(cluster.backend)
    cluster.set_status("ClusterQueue", "research", usage(8, 0))
    cluster.set_status("ClusterQueue", "vision", usage(24, 0))
    for minute in range(40, 60, 5):
        snapshot_queues(cluster.backend, created + timedelta(minutes=minute))

    hour = evaluate(created + timedelta(minutes=60))["research"]["1h"]
    # Waited 40 minutes, owed 8 GPUs then, held none; nothing counted after.
    assert hour.waiting == 40 * 60
    assert hour.deserved == 8 * 40 * 60 and hour.received == 0
    assert hour.ratio(3600) == 0.0
    assert waiting_gpus_now() == {}
