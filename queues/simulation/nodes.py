"""Nodes for the simulated cluster. A real cluster brings its own; the simulated
one gets, per ResourceFlavor, just enough 8-GPU nodes to hold the nominal GPU
quota the ClusterQueues give that flavor, labelled and tainted as the flavor
says, so capacity and utilisation read like a cluster sized to its policy."""

from __future__ import annotations

import math
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.quantity import to_canonical

GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
# Per GPU, like the H100 nodes of the demo organisation.
CPU_PER_GPU, MEMORY_GIB_PER_GPU = 24, 256


def nominal_gpus(cluster_queues: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for queue in cluster_queues:
        for group in queue.get("spec", {}).get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                for resource in flavor.get("resources", []):
                    if resource["name"] == GPU:
                        amount = to_canonical(GPU, str(resource.get("nominalQuota", 0)))
                        totals[flavor["name"]] = totals.get(flavor["name"], 0) + amount
    return totals


def node(flavor: dict[str, Any], index: int) -> dict[str, Any]:
    spec = flavor.get("spec", {})
    name = f"sim-{flavor['metadata']['name']}-{index:03d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**(spec.get("nodeLabels") or {}), "kubernetes.io/hostname": name},
        },
        "spec": {"taints": list(spec.get("nodeTaints") or [])},
        "status": {
            "allocatable": {
                "cpu": str(CPU_PER_GPU * GPUS_PER_NODE),
                "memory": f"{MEMORY_GIB_PER_GPU * GPUS_PER_NODE}Gi",
                GPU: str(GPUS_PER_NODE),
            }
        },
    }


def ensure_nodes(backend: SimulatedBackend) -> int:
    """Add the nodes a flavor is missing (never removes any). Returns how many."""
    flavors, _ = backend.list(TYPES["ResourceFlavor"])
    gpus = nominal_gpus(backend.list(TYPES["ClusterQueue"])[0])
    existing = {n["metadata"]["name"] for n in backend.list(TYPES["Node"])[0]}
    created = 0
    for flavor in flavors:
        wanted = math.ceil(gpus.get(flavor["metadata"]["name"], 0) / GPUS_PER_NODE)
        for index in range(wanted):
            body = node(flavor, index)
            if body["metadata"]["name"] not in existing:
                backend.create(body)
                created += 1
    return created
