"""The gang-fit map from what sync recorded: the nodes each topology-aware
flavor selects (``ObservedNode``) less what Kueue placed on them (each live
workload's ``topologyAssignment``, kept per pod set as ``placed_on``, else
where the engine places it, as for every estimate); the
fragmentation verdict for a waiting job; and the snapshot of it over time.

Only topology-aware flavors have a map: Kueue places their pods on nodes and
says where, so Berth knows each node's free room as Kueue counts it. On a flavor
that names no topology, Kueue admits by quota alone and kube-scheduler places
the pods, which Berth does not read (docs/gang-fit.md says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cluster.models import GangFitSnapshot, WorkloadRecord, WorkloadState
from cluster.state import current_policy, pod_set
from queues.engine.gang_fit import (
    ANYWHERE,
    FlavorRoom,
    Fragmentation,
    GangFitMap,
    flavor_room,
    fragmentation,
    gang_fit_map,
    gangs,
)
from queues.engine.model import Policy, Workload
from queues.engine.placement import place_on_nodes, placer_for
from queues.engine.topology import Placer

# The states in which a workload's pods hold room on their nodes.
HOLDING = (WorkloadState.QUOTA_RESERVED, WorkloadState.ADMITTED, WorkloadState.EVICTED)


def _per_pod_set(shapes: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    found = {str(s.get("name", "main")): s[key] for s in shapes if s.get(key) is not None}
    return found or None


def placed_usage(placer: Placer) -> dict[str, dict[str, int]]:
    """Node -> resource -> what the pods of the workloads holding quota ask for
    there: where Kueue placed them (``placed_on``), else where the engine would
    (in the order ``cluster.state`` adds them, so the two agree)."""
    rows = (
        WorkloadRecord.objects.filter(state__in=HOLDING)
        .exclude(flavors={})
        .order_by("created_at", "id")
        # Only what placing needs: a model per row would cost more than the placing.
        .values_list("namespace", "name", "cluster_queue", "created_at", "pod_sets", "flavors")
    )
    for namespace, name, queue, created_at, shapes, flavors in rows.iterator(chunk_size=2000):
        workload = Workload(
            name=name,
            namespace=namespace,
            cluster_queue=queue,
            pod_sets=tuple(pod_set(p) for p in shapes),
            creation_time=created_at.timestamp(),
            admission={k: dict(v) for k, v in flavors.items()},
            admitted_counts=_per_pod_set(shapes, "admitted_count"),
            topology_assignment=_per_pod_set(shapes, "placed_on"),
        )
        place_on_nodes(placer, workload)
    return placer.used


def flavor_rooms(policy: Policy | None = None) -> dict[str, FlavorRoom]:
    """Each topology-aware flavor's nodes with their free room now, by name."""
    policy = policy or current_policy()
    placer = placer_for(policy)
    if placer is None:
        return {}
    used = placed_usage(placer)
    return {
        flavor: flavor_room(flavor, placer.topologies[flavor], placer.nodes[flavor], used)
        for flavor in sorted(placer.topologies)
    }


def gang_fit_maps(policy: Policy | None = None) -> list[GangFitMap]:
    return [gang_fit_map(room) for room in flavor_rooms(policy).values()]


def queue_flavors(policy: Policy, cluster_queue: str) -> list[str]:
    """The flavors a ClusterQueue gives GPUs from, in its order."""
    queue = policy.cluster_queues.get(cluster_queue)
    if queue is None:
        return []
    return [
        quotas.flavor
        for group in queue.resource_groups
        for quotas in group.flavors
        if "nvidia.com/gpu" in quotas.resources
    ]


def job_verdicts(
    cluster_queue: str, pod_sets: Iterable[Mapping[str, Any]], policy: Policy | None = None
) -> list[Fragmentation]:
    """For each topology-aware flavor the queue gives GPUs from and each gang of
    the job's pod sets asking for GPUs (``gangs``), whether its pods find room
    now and, if not, why."""
    policy = policy or current_policy()
    rooms = flavor_rooms(policy)
    judged = gangs([pod_set(row) for row in pod_sets])
    verdicts = []
    for flavor in queue_flavors(policy, cluster_queue):
        room = rooms.get(flavor)
        if room is None:
            continue
        for gang in judged:
            verdict = fragmentation(room, gang.count, gang.per_pod, gang.request)
            if verdict is not None:
                verdicts.append(verdict)
    return verdicts


def snapshot_gang_fit(at: datetime, policy: Policy | None = None) -> int:
    """One GangFitSnapshot per topology-aware flavor at ``at``; a second call
    for the same instant adds nothing."""
    rows = []
    for found in gang_fit_maps(policy):
        node_gpus = max((row["gpus"] for row in found.node_rows), default=0)
        largest = {
            level: gang.pods
            for level in (ANYWHERE, *found.levels)
            if (gang := found.largest_at(level, node_gpus)) is not None
        }
        rows.append(
            GangFitSnapshot(
                at=at,
                flavor=found.flavor,
                nodes=found.nodes,
                gpus=found.gpus,
                free_gpus=found.free_gpus,
                whole_free_nodes=found.whole_free_nodes,
                stranded_gpus=found.stranded_gpus,
                largest=largest,
            )
        )
    GangFitSnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
