"""Which ClusterQueues a replay can treat apart: independent groups.

No quota flows between cohort trees, so each tree's admissions depend only on
what happens in it, with three exceptions that join trees into one group:
trees whose queues use the same topology-aware flavor share its nodes; with
``waitForPodsReady.blockAdmission`` one workload's pods block admission
everywhere; and admission fair sharing samples every LocalQueue's usage on
one clock. The simulator runs each group's cycles only when something
happened in that group, so a group replayed on its own gives what it gives
in the whole replay (``queues.engine.split``).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from queues.engine.model import Policy
from queues.engine.quota import QuotaTree

# The group of every queue when nothing can be told apart.
EVERYTHING: Final = "*"


def node_sharers(
    policy: Policy, root_of: Mapping[str, str], shares_nodes: Callable[[str], bool]
) -> dict[str, set[str]]:
    """Per flavor whose nodes are shared (``shares_nodes``), the cohort trees
    (root names, from ``root_of`` per ClusterQueue) with a queue that can use it."""
    sharers: dict[str, set[str]] = {}
    for name, queue in policy.cluster_queues.items():
        for group in queue.resource_groups:
            for quotas in group.flavors:
                if shares_nodes(quotas.flavor):
                    sharers.setdefault(quotas.flavor, set()).add(root_of[name])
    return sharers


def _topology_aware(policy: Policy) -> Callable[[str], bool]:
    def aware(name: str) -> bool:
        flavor = policy.flavors.get(name)
        return flavor is not None and bool(flavor.topology_name)

    return aware


def independent_groups(policy: Policy, tree: QuotaTree | None = None) -> dict[str, str]:
    """Each ClusterQueue's group, named by the first (by name) root cohort, or
    ClusterQueue without one, in it."""
    tree = tree if tree is not None else QuotaTree(policy)
    root_of = {name: node.root().name for name, node in tree.queues.items()}
    pods_ready = policy.wait_for_pods_ready
    if policy.admission_fair_sharing is not None or (
        pods_ready is not None and pods_ready.block_admission
    ):
        return dict.fromkeys(root_of, EVERYTHING)
    parent = {root: root for root in root_of.values()}

    def find(root: str) -> str:
        while parent[root] != root:
            parent[root] = parent[parent[root]]
            root = parent[root]
        return root

    for roots in node_sharers(policy, root_of, _topology_aware(policy)).values():
        first, *others = sorted(roots)
        for other in others:
            a, b = find(first), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {name: find(root) for name, root in root_of.items()}
