"""Between the scheduler and the topology placer: which flavors place pods on
nodes, and where an admitted workload's pods go.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Collection

from queues.engine.assign import Assignment
from queues.engine.model import Policy, Workload
from queues.engine.topology import Placer, add_pods


def placer_for(policy: Policy) -> Placer | None:
    """A placer for the flavors that name a topology, with the nodes each
    selects by its node labels; None when no flavor is topology-aware. A flavor
    whose nodes nobody has seen (no inventory yet) is judged by quota alone:
    promising nothing at all would be wrong more often."""
    nodes = {
        name: [
            node
            for node in policy.nodes
            if all(node.labels.get(k) == v for k, v in flavor.node_labels.items())
        ]
        for name, flavor in policy.flavors.items()
        if flavor.topology_name and flavor.topology_name in policy.topologies
    }
    aware = {
        name: policy.topologies[policy.flavors[name].topology_name or ""]
        for name, found in nodes.items()
        if found
    }
    if not aware:
        return None
    return Placer(aware, {name: nodes[name] for name in aware})


def _pod_set_flavor(flavors: dict[str, str]) -> str | None:
    return next(iter(flavors.values()), None)


def place_on_nodes(placer: Placer, workload: Workload) -> None:
    """Hold node room for an admitted workload's pods on topology-aware flavors
    (where they fit; a snapshot may hold more than the nodes have)."""
    counts = workload.admitted_counts or {}
    for pod_set in workload.pod_sets:
        flavor = _pod_set_flavor((workload.admission or {}).get(pod_set.name, {}))
        if flavor is None or not placer.handles(flavor):
            continue
        given = (workload.topology_assignment or {}).get(pod_set.name)
        if given is None:
            count = counts.get(pod_set.name, pod_set.count)
            given = placer.place(flavor, pod_set.requests, count, pod_set.topology_request).nodes
        placer.hold(workload.key, pod_set.name, pod_set.requests, given)


def fits_on_nodes(
    placer: Placer | None,
    workload: Workload,
    assignment: Assignment,
    without: Collection[str] = (),
) -> bool:
    """Whether the pods find room now (after what this cycle admitted before),
    or once the workloads ``without`` have gone. The pod sets go one after
    another, each after the room the earlier ones took, as Kueue places them."""
    if placer is None:
        return True
    counts = assignment.counts or {}
    flavors = assignment.flavors()
    taken: dict[str, dict[str, int]] = {}
    for pod_set in workload.pod_sets:
        flavor = _pod_set_flavor(flavors.get(pod_set.name, {}))
        if flavor is None or not placer.handles(flavor):
            continue
        count = counts.get(pod_set.name, pod_set.count)
        placement = placer.place(
            flavor, pod_set.requests, count, pod_set.topology_request, without=without, also=taken
        )
        if not placement.placed:
            return False
        add_pods(taken, pod_set.requests, placement.nodes)
    return True
