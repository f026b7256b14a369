"""The Kueue objects and readers the simulated-cluster tests share."""

from __future__ import annotations

from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend

KUEUE = "kueue.x-k8s.io/v1beta2"
SPEEDUP = 60.0


def kueue_objects(gpus: int = 8) -> list[dict[str, Any]]:
    """One flavor, one ClusterQueue of ``gpus`` GPUs preempting lower priority
    within itself, one LocalQueue in namespace team-a, two priority classes."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {"nodeLabels": {"gpu": "h100"}},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "team-a"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": str(24 * gpus)},
                                    {"name": "memory", "nominalQuota": f"{256 * gpus}Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": "team-a"},
            "spec": {"clusterQueue": "team-a"},
        },
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "low"},
            "value": 10,
        },
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
    ]


def workload(backend: SimulatedBackend, job_name: str) -> dict[str, Any]:
    found = backend.get(TYPES["Workload"], f"job-{job_name}", "team-a")
    assert found is not None, f"no workload for job {job_name}"
    return found


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c["reason"])
        for c in (obj.get("status") or {}).get("conditions", [])
    }


def gpu_usage(backend: SimulatedBackend) -> str:
    queue = backend.get(TYPES["ClusterQueue"], "team-a")
    assert queue is not None
    for flavor in queue["status"]["flavorsReservation"]:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                return str(resource["total"])
    return "0"
