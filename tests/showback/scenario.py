"""October 2026 on a cluster, through sync, with every figure known.

On the jobs tests' organisation (teams research and serving, flavors h100 and
h100-spot, queues research, research-eval, serving in cohort org):

- h100 costs 2.49 per GPU-hour until 2026-10-15 12:00, then 3.00;
  h100-spot costs 0.8725 throughout (prices set through the policy service,
  their history entries dated so).
- A, research/train-a: 8 GPUs on h100 (queue research, training), quota
  reserved 10-10 09:30, admitted 10:00, finished 12:30: 3 h × 8 = 24 GPU-h at
  2.49 = 59.76.
- B, research/eval-b: 4 GPUs on h100-spot (research-eval, evaluation),
  admitted 10-12 00:00, preempted 03:40 (its Berth job checkpoints hourly: 40
  min of 4 GPUs lost = 2.6667 GPU-h, 2.33), readmitted 04:00, finished 05:00:
  4 h 40 min × 4 = 18.6667 GPU-h at 0.8725 = 16.29.
- C, serving/serve-c: 16 GPUs on h100 (serving, training), admitted 10-15
  10:00, finished 14:00, across the price change: 32 GPU-h at 2.49 and 32
  at 3.00 = 175.68.
- D, research/long-d: 4 GPUs on h100 (research), admitted 10-20 09:00,
  finished 11:00 (8 GPU-h at 3.00 = 24.00), while queue research borrows
  4 GPUs from serving: snapshots at 10:00, 10:30 and 11:00, 30 minutes
  apart, each counting 30 minutes: 6 GPU-h borrowed by research from serving.
  Its busy GPUs (simulated) are sampled at the first two (at 11:00 it ended).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from cluster.models import WorkloadRecord
from cluster.snapshots import snapshot_queues
from cluster.sync import sync_workloads
from cluster.utilisation import efficiency
from jobs.models import JobRequest
from queues import services
from queues.choices import PolicyKind
from queues.models import PolicyChange, ResourceFlavor, Team
from tests.reconcile.clusters import ClusterUnderTest, SimulatedCluster

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
MONTH = "2026-10"


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-{text}:00+00:00")


def stamp(text: str) -> str:
    return at(text).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: bool, reason: str, when: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": "",
        "lastTransitionTime": stamp(when),
    }


def workload(namespace: str, name: str, queue: str, pods: int, per_pod: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}",
            "namespace": namespace,
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"uid-{name}"}
            ],
        },
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "trainer:1",
                                    "resources": {"requests": {GPU: str(per_pod)}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def admitted(queue: str, flavor: str, pods: int, reserved: str, admitted_at: str) -> dict[str, Any]:
    return {
        "admission": {
            "clusterQueue": queue,
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": pods,
                    "flavors": {GPU: flavor},
                }
            ],
        },
        "conditions": [
            condition("QuotaReserved", True, "QuotaReserved", reserved),
            condition("Admitted", True, "Admitted", admitted_at),
        ],
    }


def finished(status: dict[str, Any], when: str) -> dict[str, Any]:
    return {
        **status,
        "conditions": [*status["conditions"], condition("Finished", True, "Succeeded", when)],
    }


def preempted(when: str) -> dict[str, Any]:
    return {
        "admission": None,
        "conditions": [
            condition("QuotaReserved", False, "Pending", when),
            condition("Admitted", False, "NoReservation", when),
            condition("Evicted", True, "Preempted", when),
            condition("Preempted", True, "InClusterQueue", when),
            condition("Requeued", True, "Preempted", when),
        ],
    }


def cluster_queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "org",
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


def queue_status(total: int, borrowed: int) -> dict[str, Any]:
    return {
        "flavorsReservation": [
            {
                "name": "h100",
                "resources": [{"name": GPU, "total": str(total), "borrowed": str(borrowed)}],
            }
        ]
    }


def set_price(flavor: str, price: str | None, since: str) -> None:
    """Through the policy service, as an admin would; its history entry dated ``since``."""
    obj = ResourceFlavor.objects.get(name=flavor)
    services.resource_flavors.update(actor=None, obj=obj, data={"gpu_hour_price": price})
    change = PolicyChange.objects.filter(
        kind=PolicyKind.RESOURCE_FLAVOR, object_name=flavor
    ).first()
    assert change is not None and change.after is not None  # newest first: this change
    PolicyChange.objects.filter(pk=change.pk).update(at=at(since))


@dataclass(frozen=True)
class October:
    """What the scenario recorded: the workloads' uids, D's simulated busy GPU-hours."""

    uids: dict[str, str]
    busy_d: float


def prices() -> None:
    # Every earlier history entry of the flavors (their creation) before September.
    PolicyChange.objects.filter(kind=PolicyKind.RESOURCE_FLAVOR).update(at=at("08-01T00:00"))
    set_price("h100", "2.49", "09-01T00:00")
    set_price("h100-spot", "0.8725", "09-01T00:00")
    set_price("h100", "3", "10-15T12:00")


def build(cluster: ClusterUnderTest | SimulatedCluster) -> October:
    """Prices, the four workloads through sync, and the three snapshots."""
    prices()
    for namespace in ("research", "serving"):
        cluster.add_foreign(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    # B's Berth job: it checkpoints every hour.
    JobRequest.objects.create(
        name="eval-b",
        team=Team.objects.get(slug="research"),
        namespace="research",
        kind="Job",
        image="trainer:1",
        local_queue="research-eval",
        cluster_queue="research-eval",
        nodes=1,
        gpus_per_node=4,
        checkpoint_uri="s3://bucket/eval-b",
        checkpoint_interval_seconds=3600,
        submitted_at=at("10-11T23:50"),
    )

    def step(namespace: str, name: str, status: dict[str, Any]) -> None:
        cluster.set_status("Workload", f"job-{name}", status, namespace=namespace)
        sync_workloads(cluster.backend)

    cluster.add_foreign(workload("research", "train-a", "research", 2, 4))
    a = admitted("research", "h100", 2, "10-10T09:30", "10-10T10:00")
    step("research", "train-a", a)
    step("research", "train-a", finished(a, "10-10T12:30"))

    cluster.add_foreign(workload("research", "eval-b", "research-eval", 1, 4))
    step(
        "research",
        "eval-b",
        admitted("research-eval", "h100-spot", 1, "10-12T00:00", "10-12T00:00"),
    )
    step("research", "eval-b", preempted("10-12T03:40"))
    again = admitted("research-eval", "h100-spot", 1, "10-12T04:00", "10-12T04:00")
    again["conditions"] += [
        condition("Evicted", False, "Preempted", "10-12T04:00"),
        condition("Requeued", True, "Preempted", "10-12T03:40"),
    ]
    step("research", "eval-b", again)
    step("research", "eval-b", finished(again, "10-12T05:00"))

    cluster.add_foreign(workload("serving", "serve-c", "serving", 2, 8))
    c = admitted("serving", "h100", 2, "10-15T10:00", "10-15T10:00")
    step("serving", "serve-c", c)
    step("serving", "serve-c", finished(c, "10-15T14:00"))

    cluster.add_foreign(workload("research", "long-d", "research", 1, 4))
    d = admitted("research", "h100", 1, "10-20T09:00", "10-20T09:00")
    step("research", "long-d", d)
    for name, total, borrowed in (("research", 20, 4), ("serving", 0, 0)):
        cluster.add_foreign(cluster_queue(name))
        cluster.set_status("ClusterQueue", name, queue_status(total, borrowed))
    snapshot_queues(cluster.backend, at("10-20T10:00"))
    snapshot_queues(cluster.backend, at("10-20T10:30"))
    step("research", "long-d", finished(d, "10-20T11:00"))
    snapshot_queues(cluster.backend, at("10-20T11:00"))
    uids = dict(WorkloadRecord.objects.values_list("job_name", "uid"))
    # Two samples of 30 minutes of D's 4 GPUs at its simulated efficiency.
    busy_d = 2 * 0.5 * 4 * efficiency(uids["long-d"])
    assert timezone.now() > at("10-31T23:59")  # the month is over, whenever this runs
    return October(uids=uids, busy_d=busy_d)


def money(text: str) -> Decimal:
    return Decimal(text)
