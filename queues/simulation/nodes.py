"""Nodes for the simulated cluster. A real cluster brings its own; the simulated
one gets, per ResourceFlavor, just enough 8-GPU nodes to hold the nominal GPU
quota the ClusterQueues give that flavor, labelled and tainted as the flavor
says, so capacity and utilisation read like a cluster sized to its policy.
Like a GPU data centre's, they sit in racks of four nodes and blocks of four
racks (``RACK_LABEL``, ``BLOCK_LABEL``), for topology-aware scheduling."""

from __future__ import annotations

import math
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.quantity import to_canonical

GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
BLOCK_LABEL = "topology.berth.dev/block"
RACK_LABEL = "topology.berth.dev/rack"
NODES_PER_RACK, RACKS_PER_BLOCK = 4, 4
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
            "labels": {
                **(spec.get("nodeLabels") or {}),
                **placement_labels(flavor["metadata"]["name"], index),
                "kubernetes.io/hostname": name,
            },
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


def placement_labels(flavor: str, index: int) -> dict[str, str]:
    rack = index // NODES_PER_RACK
    return {
        BLOCK_LABEL: f"{flavor}-b{rack // RACKS_PER_BLOCK}",
        RACK_LABEL: f"{flavor}-r{rack}",
    }


def ensure_nodes(backend: SimulatedBackend) -> int:
    """Add the nodes a flavor is missing (never removes any), and give nodes
    from before racks existed their rack and block. Returns how many it added."""
    flavors, _ = backend.list(TYPES["ResourceFlavor"])
    gpus = nominal_gpus(backend.list(TYPES["ClusterQueue"])[0])
    existing = {n["metadata"]["name"]: n for n in backend.list(TYPES["Node"])[0]}
    created = 0
    for flavor in flavors:
        wanted = math.ceil(gpus.get(flavor["metadata"]["name"], 0) / GPUS_PER_NODE)
        for index in range(wanted):
            body = node(flavor, index)
            old = existing.get(body["metadata"]["name"])
            if old is None:
                backend.create(body)
                created += 1
            elif RACK_LABEL not in (old["metadata"].get("labels") or {}):
                old["metadata"].setdefault("labels", {}).update(
                    placement_labels(flavor["metadata"]["name"], index)
                )
                backend.replace(old)
    return created
