"""The status the simulated Kueue writes on its queues: usage per flavor on
every ClusterQueue, and workload counts on every LocalQueue, as Kueue's
controllers keep them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.engine.scheduler import Scheduler
from queues.quantity import format_canonical
from queues.simulation.job_kinds import condition, set_condition

# Writes an object back (the simulated Kueue's own writer, which tolerates deletion).
Write = Callable[[dict[str, Any]], None]


def finished(obj: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions", [])
    )


def cluster_queue_status(
    backend: SimulatedBackend, write: Write, scheduler: Scheduler, now: float
) -> None:
    """Usage per flavor and workload counts on every ClusterQueue, as Kueue writes them."""
    for name, node in scheduler.tree.queues.items():
        obj = backend.get(TYPES["ClusterQueue"], name)
        if obj is None:
            continue
        flavors: dict[str, list[dict[str, Any]]] = {}
        for (flavor, resource), quota in sorted(node.quotas.items()):
            used = node.used((flavor, resource))
            flavors.setdefault(flavor, []).append(
                {
                    "name": resource,
                    "total": format_canonical(resource, used),
                    "borrowed": format_canonical(resource, max(0, used - quota.nominal)),
                }
            )
        holders = scheduler.reserved.get(name, {})
        status = {
            "pendingWorkloads": len(scheduler.queues[name]),
            "reservingWorkloads": len(holders),
            "admittedWorkloads": sum(1 for w in holders.values() if w.is_admitted),
            "flavorsReservation": [{"name": f, "resources": r} for f, r in flavors.items()],
            "flavorsUsage": [{"name": f, "resources": r} for f, r in flavors.items()],
        }
        if {k: v for k, v in (obj.get("status") or {}).items() if k != "conditions"} != status:
            body = copy.deepcopy(obj)
            body["status"] = {**(obj.get("status") or {}), **status}
            set_condition(body, condition("Active", True, "Ready", "Can admit new workloads", now))
            write(body)


def local_queue_status(
    backend: SimulatedBackend,
    write: Write,
    workloads: Mapping[tuple[str, str], Mapping[str, Any]],
    now: float,
) -> None:
    """Pending, reserving and admitted counts on every LocalQueue."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for (namespace, _), obj in workloads.items():
        if finished(obj):
            continue
        key = (namespace, obj["spec"].get("queueName", ""))
        entry = counts.setdefault(
            key, {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}
        )
        current = backend.get(TYPES["Workload"], obj["metadata"]["name"], namespace)
        status = (current or obj).get("status") or {}
        if status.get("admission"):
            entry["reservingWorkloads"] += 1
            if any(
                c["type"] == "Admitted" and c["status"] == "True"
                for c in status.get("conditions", [])
            ):
                entry["admittedWorkloads"] += 1
        else:
            entry["pendingWorkloads"] += 1
    for queue in backend.list(TYPES["LocalQueue"])[0]:
        key = (queue["metadata"]["namespace"], queue["metadata"]["name"])
        status = counts.get(
            key, {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}
        )
        if {k: (queue.get("status") or {}).get(k) for k in status} != status:
            body = copy.deepcopy(queue)
            body["status"] = {**(queue.get("status") or {}), **status}
            write(body)
