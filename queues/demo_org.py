"""The demo organisation ``seed_demo`` builds: 64 H100 GPUs shared by three teams.

Capacity: 8 nodes of 8 H100s (192 cores, 2 TiB each), 6 on-demand and 2 spot,
so every quota is whole GPUs with the CPU and memory that come with them.

| queue          | team     | class           | guaranteed GPUs          | may borrow   |
|----------------|----------|-----------------|--------------------------|--------------|
| research       | research | training-large  | 24 on-demand             | 16           |
| serving        | serving  | eval-batch      | 8 on-demand + 16 spot    | 8 + 8        |
| platform       | platform | interactive-dev | 8 on-demand              | 8            |
| urgent-release | (shared) | urgent-release  | 8 on-demand              | none         |

Topology ``gpu-racks`` describes how the nodes nest (block, rack, host); the
on-demand H100 flavor names it, so gangs there are placed node by node and
can ask for one rack (see ``TOPOLOGIES``). All four queues are in cohort
``ai-shared``; nominal quotas add up to exactly 48 on-demand and 16 spot GPUs.
Spot capacity belongs to the one queue class that runs on spot
(``eval-batch``); the others refuse spot, so their queues hold on-demand quota
only, and every GPU a queue is promised is one its jobs can use.
"""

from __future__ import annotations

from typing import Any

CPU_PER_GPU = 24
MEMORY_GIB_PER_GPU = 256
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
SPOT_TAINT = {"key": "berth.dev/spot", "value": "true", "effect": "NoSchedule"}

# How the simulated cluster's nodes nest (queues/simulation/nodes.py labels
# them so): 4 nodes to a rack, 4 racks to a block. h100-ondemand names it;
# Kueue then freezes that flavor's topology_name, node labels and tolerations.
TOPOLOGIES: list[dict[str, Any]] = [
    {
        "name": "gpu-racks",
        "description": "Blocks of 4 racks of 4 nodes; a gang can ask for one rack or one block",
        "levels": ["topology.berth.dev/block", "topology.berth.dev/rack", "kubernetes.io/hostname"],
    },
]

FLAVORS: list[dict[str, Any]] = [
    {
        "name": "h100-ondemand",
        "description": "6 on-demand nodes × 8 H100 80GB",
        "node_labels": {
            "nvidia.com/gpu.product": GPU_PRODUCT,
            "berth.dev/capacity-type": "on-demand",
        },
        "capacity_type": "on-demand",
        "topology_name": "gpu-racks",
        # Illustrative list prices per GPU-hour (BERTH_CURRENCY), for the usage page.
        "gpu_hour_price": "3.90",
    },
    {
        "name": "h100-spot",
        "description": "2 spot nodes × 8 H100 80GB; the provider may reclaim them",
        "node_labels": {"nvidia.com/gpu.product": GPU_PRODUCT, "berth.dev/capacity-type": "spot"},
        "node_taints": [SPOT_TAINT],
        "capacity_type": "spot",
        "gpu_hour_price": "1.60",
    },
]

PRIORITY_CLASSES: list[dict[str, Any]] = [
    {"name": "train-high", "value": 100000, "description": "Deadline training and releases"},
    {"name": "train-low", "value": 1000, "description": "Best-effort and batch work"},
]

QUEUE_CLASS_PRIORITIES = {"eval-batch": "train-low", "urgent-release": "train-high"}

COHORTS: list[dict[str, Any]] = [
    {"name": "ai-shared", "description": "Every GPU queue lends and borrows here"},
]

TEAMS: list[dict[str, Any]] = [
    {"slug": "research", "name": "Research", "description": "Pre-training and fine-tuning"},
    {"slug": "serving", "name": "Serving", "description": "Evaluation and inference"},
    {"slug": "platform", "name": "Platform", "description": "Infrastructure and tooling"},
]


def _gpu_quota(gpus: int, borrow: int | None) -> list[dict[str, Any]]:
    """cpu, memory and GPUs in proportion, for ``gpus`` guaranteed and ``borrow`` more."""

    def entry(name: str, per_gpu: int, unit: str) -> dict[str, Any]:
        item: dict[str, Any] = {"name": name, "nominal_quota": f"{gpus * per_gpu}{unit}"}
        if borrow is not None:
            item["borrowing_limit"] = f"{borrow * per_gpu}{unit}"
        return item

    return [
        entry("cpu", CPU_PER_GPU, ""),
        entry("memory", MEMORY_GIB_PER_GPU, "Gi"),
        entry("nvidia.com/gpu", 1, ""),
    ]


def _groups(
    ondemand: tuple[int, int | None], spot: tuple[int, int | None] | None = None
) -> list[dict[str, Any]]:
    flavors = [{"name": "h100-ondemand", "resources": _gpu_quota(*ondemand)}]
    if spot is not None:
        flavors.append({"name": "h100-spot", "resources": _gpu_quota(*spot)})
    return [{"covered_resources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": flavors}]


CLUSTER_QUEUES: list[dict[str, Any]] = [
    {
        "name": "research",
        "team": "research",
        "queue_class": "training-large",
        "cohort": "ai-shared",
        "resource_groups": _groups((24, 16)),
    },
    {
        "name": "serving",
        "team": "serving",
        "queue_class": "eval-batch",
        "cohort": "ai-shared",
        "resource_groups": _groups((8, 8), (16, 8)),
    },
    {
        "name": "platform",
        "team": "platform",
        "queue_class": "interactive-dev",
        "cohort": "ai-shared",
        "resource_groups": _groups((8, 8)),
    },
    {
        "name": "urgent-release",
        "team": None,
        "queue_class": "urgent-release",
        "cohort": "ai-shared",
        "description": "Shared by all teams; every job needs approval",
        "resource_groups": _groups((8, 0)),
    },
]

# username, password, role description, superuser, groups, team roles
USERS: list[dict[str, Any]] = [
    {
        "username": "admin",
        "password": "admin-demo",
        "role": "platform admin",
        "superuser": True,
        "groups": [],
        "teams": [],
    },
    {
        "username": "approver",
        "password": "approver-demo",
        "role": "global approver",
        "superuser": False,
        "groups": ["approvers"],
        "teams": [],
    },
    {
        "username": "rita",
        "password": "rita-demo",
        "role": "research approver and member",
        "superuser": False,
        "groups": [],
        "teams": [("research", "approver"), ("research", "member")],
    },
    {
        "username": "alice",
        "password": "alice-demo",
        "role": "research member",
        "superuser": False,
        "groups": [],
        "teams": [("research", "member")],
    },
    {
        "username": "bob",
        "password": "bob-demo",
        "role": "serving member",
        "superuser": False,
        "groups": [],
        "teams": [("serving", "member")],
    },
    {
        "username": "carol",
        "password": "carol-demo",
        "role": "platform member",
        "superuser": False,
        "groups": [],
        "teams": [("platform", "member")],
    },
]
