"""The engine's Workload for a stored Kueue Workload object, as the simulated
cluster's Kueue reads it each step: pod sets with their requests, minCount and
topology request; the admission, the pods it admitted and where they run; the
check states and the requeue time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queues.engine.model import CheckState, PodSet, Toleration, Workload
from queues.engine.topology import TopologyRequest
from queues.kueue import topology_assignment
from queues.quantity import QuantityError, to_canonical
from queues.simulation.annotations import (
    DEFAULT_RUNTIME,
    RUNTIME,
    STARTED,
    epoch,
)


def engine_workload(obj: Mapping[str, Any], queue: str, now: float) -> Workload:
    metadata = obj["metadata"]
    annotations = metadata.get("annotations", {})
    pod_sets = []
    for pod_set in obj["spec"].get("podSets", []):
        template = pod_set.get("template", {}).get("spec", {})
        requests: dict[str, int] = {}
        for container in template.get("containers", []):
            for resource, value in (container.get("resources", {}).get("requests") or {}).items():
                try:
                    requests[resource] = requests.get(resource, 0) + to_canonical(resource, value)
                except QuantityError:
                    continue
        pod_sets.append(
            PodSet(
                pod_set.get("name", "main"),
                int(pod_set.get("count", 1)),
                requests,
                dict(template.get("nodeSelector") or {}),
                tuple(Toleration.from_kueue(t) for t in template.get("tolerations") or []),
                min_count=pod_set.get("minCount"),
                topology_request=TopologyRequest.from_kueue(pod_set.get("topologyRequest")),
            )
        )
    status = obj.get("status") or {}
    admission = None
    if status.get("admission"):
        admission = {
            a["name"]: dict(a.get("flavors", {}))
            for a in status["admission"].get("podSetAssignments", [])
        }
    workload = Workload(
        name=metadata["name"],
        namespace=metadata["namespace"],
        cluster_queue=queue,
        local_queue=str(obj["spec"].get("queueName", "")),
        pod_sets=tuple(pod_sets),
        priority=int(obj["spec"].get("priority") or 0),
        creation_time=epoch(metadata.get("creationTimestamp"), now),
        runtime=float(annotations.get(RUNTIME, DEFAULT_RUNTIME)),
        admission=admission,
        admitted_at=epoch(annotations.get(STARTED), now) if admission else None,
        active=obj["spec"].get("active", True) is not False,
    )
    if admission is not None:
        assigned = status["admission"].get("podSetAssignments", [])
        counts = {a["name"]: int(a["count"]) for a in assigned if "count" in a}
        full = {p.name: p.count for p in workload.pod_sets}
        if any(counts.get(name, count) != count for name, count in full.items()):
            workload.admitted_counts = counts
        placed = {
            a["name"]: nodes
            for a in assigned
            if a.get("topologyAssignment")
            and (nodes := topology_assignment.pods_per_node(a["topologyAssignment"])) is not None
        }
        if placed:
            workload.topology_assignment = placed
    requeue_at = (status.get("requeueState") or {}).get("requeueAt")
    if requeue_at:
        workload.requeue_at = epoch(requeue_at, now)
    workload.check_states = {
        c["name"]: CheckState(c["state"])
        for c in status.get("admissionChecks", [])
        if c.get("state") in {s.value for s in CheckState}
    }
    return workload
