"""The quota tree, per flavor × resource, as Kueue v0.19 computes it.

Every ClusterQueue and Cohort is a node. For a flavor-resource ``fr``:

- **subtree quota**: a ClusterQueue's nominal quota; a Cohort's own nominal
  quota plus, for each child, the child's subtree quota minus what the child
  keeps for itself;
- **local quota** (what a node keeps and never lends):
  ``max(0, subtree − lendingLimit)`` when a lendingLimit is set, else 0 —
  without a lendingLimit everything goes into the parent's pool;
- **usage** beyond a node's unused local quota is also usage of its parent,
  recursively;
- **available**: a root's subtree quota minus its usage; below the root, the
  node's unused local quota plus what its parent has available, capped by the
  node's borrowingLimit (it never holds more than ``subtree + borrowingLimit``).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mypy_extensions import mypyc_attr

from queues.engine.model import FlavorResource, Policy, Quota

# Past any usage (``Node.steady_between``'s open ends); small enough for a
# compiled int.
UNBOUNDED = 1 << 60


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(eq=False)
class Node:
    """A ClusterQueue or a Cohort in the tree."""

    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, Quota]
    weight: float = 1.0
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    height: int = 0
    # The flavor-resources whose usage is above the subtree quota, kept as usage
    # changes: the victim search asks every queue of a cohort whether it
    # borrows, once per search, and that is a set test instead of a loop.
    over: set[FlavorResource] = field(default_factory=set, repr=False)

    def __repr__(self) -> str:
        return f"{'Cohort' if self.is_cohort else 'ClusterQueue'}({self.name})"

    # The static figures, filled once the tree is built (_freeze): the
    # preemption search asks for them millions of times per replay.
    _nominal: dict[FlavorResource, int] = field(default_factory=dict, repr=False)
    _borrowing: dict[FlavorResource, int | None] = field(default_factory=dict, repr=False)
    _local: dict[FlavorResource, int] = field(default_factory=dict, repr=False)
    _potential: dict[FlavorResource, int] = field(default_factory=dict, repr=False)
    # Per flavor-resource with a quota here, what ``available`` reads of it
    # (local quota, borrowing limit, what it lends), in one lookup.
    _room: dict[FlavorResource, tuple[int, int | None, int]] = field(
        default_factory=dict, repr=False
    )

    def _freeze(self) -> None:
        self._nominal = {fr: q.nominal for fr, q in self.quotas.items()}
        self._borrowing = {fr: q.borrowing_limit for fr, q in self.quotas.items()}
        self._local = {
            fr: max(0, self.subtree.get(fr, 0) - q.lending_limit)
            for fr, q in self.quotas.items()
            if q.lending_limit is not None
        }
        self._room = {
            fr: (self.local_quota(fr), q.borrowing_limit, self.lendable(fr))
            for fr, q in self.quotas.items()
        }

    # ------------------------------------------------------------ quota figures

    def nominal(self, fr: FlavorResource) -> int:
        return self._nominal.get(fr, 0)

    def borrowing_limit(self, fr: FlavorResource) -> int | None:
        return self._borrowing.get(fr)

    def lending_limit(self, fr: FlavorResource) -> int | None:
        quota = self.quotas.get(fr)
        return quota.lending_limit if quota else None

    def local_quota(self, fr: FlavorResource) -> int:
        """What the node keeps for its own subtree and never lends upward."""
        return self._local.get(fr, 0)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self._local.get(fr, 0) - self.usage.get(fr, 0))

    def lendable(self, fr: FlavorResource) -> int:
        """What the node puts into its parent's pool."""
        return self.subtree.get(fr, 0) - self.local_quota(fr)

    def available(self, fr: FlavorResource) -> int:
        """What this node could still take for ``fr`` (negative when over-admitted)."""
        used = self.usage.get(fr, 0)
        parent = self.parent
        if parent is None:
            return self.subtree.get(fr, 0) - used
        from_parent = parent.available(fr)
        room = self._room.get(fr)
        if room is None:  # no quota here: nothing kept, no limit
            return max(0, -used) + from_parent
        local, limit, lendable = room
        if limit is not None:
            from_parent = min(from_parent, lendable - max(0, used - local) + limit)
        return max(0, local - used) + from_parent

    def steady_between(self, fr: FlavorResource) -> tuple[int, int] | None:
        """The range of its parent's usage of ``fr`` over which what this
        node could still take (``available``, from 0 up) stays what it is
        now, its own usage as it is; None: not worked out (a root, or a node
        deeper down, where more than one level moves it) or no such range.
        A queue borrowing up to its limit, or with nothing left to take, is
        told the same whatever else its cohort admits or finishes: a waiting
        gang, its figures read again at every change there.

        Below a root, the room is ``own + min(from_parent, limit)`` (at
        least 0), with ``own`` and ``limit`` set by the node's own usage:
        the same for any ``from_parent`` at or above ``limit``, and 0 for
        any at or below ``-own``."""
        parent = self.parent
        if parent is None or parent.parent is not None:
            return None
        used = self.usage.get(fr, 0)
        total = parent.subtree.get(fr, 0)
        from_parent = total - parent.usage.get(fr, 0)
        room = self._room.get(fr)
        limit: int | None = None
        if room is None:
            own = max(0, -used)
        else:
            local, borrowing, lendable = room
            own = max(0, local - used)
            if borrowing is not None:
                limit = lendable - max(0, used - local) + borrowing
        if limit is not None and own + limit <= 0:
            return -UNBOUNDED, UNBOUNDED
        if limit is not None and from_parent >= limit:
            return -UNBOUNDED, total - limit
        if own + from_parent <= 0:
            return total + own, UNBOUNDED
        return None

    def potential_available(self, fr: FlavorResource) -> int:
        """The most this node could ever use, with nothing running anywhere: a
        request above this never fits, whatever is preempted. Quotas do not
        change during a tree's life, so each answer is kept."""
        known = self._potential.get(fr)
        if known is not None:
            return known
        if self.parent is None:
            potential = self.subtree.get(fr, 0)
        else:
            potential = self.local_quota(fr) + self.parent.potential_available(fr)
            limit = self.borrowing_limit(fr)
            if limit is not None:
                potential = min(potential, self.subtree.get(fr, 0) + limit)
        self._potential[fr] = potential
        return potential

    def borrowing_with(self, fr: FlavorResource, amount: int) -> bool:
        """A ClusterQueue compares with its nominal quota, a Cohort with its subtree."""
        limit = self.subtree.get(fr, 0) if self.is_cohort else self.nominal(fr)
        return limit < self.usage.get(fr, 0) + amount

    def within_nominal(self, frs: Iterator[FlavorResource] | set[FlavorResource]) -> bool:
        return self.over.isdisjoint(frs)

    # ---------------------------------------------------------------- mutation

    def add_usage(self, fr: FlavorResource, amount: int) -> None:
        """Add usage; the part beyond unused local quota bubbles to the parent."""
        node: Node | None = self
        while node is not None:
            used = node.usage.get(fr, 0)
            spare = max(0, node._local.get(fr, 0) - used)
            node.usage[fr] = used + amount
            if used + amount > node.subtree.get(fr, 0):
                node.over.add(fr)
            if amount <= spare:
                return
            amount -= spare
            node = node.parent

    def remove_usage(self, fr: FlavorResource, amount: int) -> None:
        node: Node | None = self
        while node is not None:
            used = node.usage.get(fr, 0)
            stored_in_parent = used - node._local.get(fr, 0)
            node.usage[fr] = used - amount
            if used - amount <= node.subtree.get(fr, 0):
                node.over.discard(fr)
            if stored_in_parent <= 0:
                return
            amount = min(amount, stored_in_parent)
            node = node.parent

    # -------------------------------------------------------------- navigation

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> str:
        """Kueue's path notation: /root/…/parent/name."""
        names = [self.name, *(a.name for a in self.ancestors())]
        return "/" + "/".join(reversed(names))

    def queues(self) -> Iterator[Node]:
        """Every ClusterQueue in this node's subtree (itself, for a queue)."""
        if not self.is_cohort:
            yield self
            return
        for child in self.children:
            yield from child.queues()

    def borrowing_level(self, fr: FlavorResource, amount: int) -> tuple[int, bool]:
        """How far up the tree ``amount`` more of ``fr`` must come from (0: within
        the queue's nominal quota), and whether the subtree that can hold it still
        has a parent (so reclaiming inside the hierarchy could help)."""
        if self.parent is None or not self.borrowing_with(fr, amount):
            return 0, self.parent is not None
        remaining = amount - self.local_available(fr)
        ancestor = self.parent
        while ancestor.parent is not None:
            if not ancestor.borrowing_with(fr, remaining):
                return ancestor.height, True
            remaining -= ancestor.local_available(fr)
            ancestor = ancestor.parent
        # At the root, borrowing or not, there is nothing above to reclaim from
        # (asked for every read of every waiting head: not worked out).
        return ancestor.height, False


def _quotas(groups: Any) -> dict[FlavorResource, Quota]:
    quotas: dict[FlavorResource, Quota] = {}
    for group in groups:
        for fq in group.flavors:
            for resource, quota in fq.resources.items():
                quotas[(fq.flavor, resource)] = quota
    return quotas


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QuotaTree:
    """Nodes for every ClusterQueue and Cohort of a policy, with usage."""

    def __init__(self, policy: Policy) -> None:
        self.cohorts: dict[str, Node] = {
            name: Node(name, True, _quotas(c.resource_groups), c.fair_sharing_weight)
            for name, c in policy.cohorts.items()
        }
        self.queues: dict[str, Node] = {
            name: Node(name, False, _quotas(q.resource_groups), q.fair_sharing_weight)
            for name, q in policy.cluster_queues.items()
        }
        # Children in name order: Kueue leaves sibling order to Go's map
        # iteration; a fixed order keeps every decision reproducible.
        for name in sorted(policy.cohorts):
            parent = policy.cohorts[name].parent
            if parent is not None and parent in self.cohorts:
                self._attach(self.cohorts[name], self.cohorts[parent])
        for name in sorted(policy.cluster_queues):
            cohort = policy.cluster_queues[name].cohort
            if cohort is not None:
                self._attach(self.queues[name], self.cohorts[cohort])
        self.roots = [
            n for n in (*self.cohorts.values(), *self.queues.values()) if n.parent is None
        ]
        for root in self.roots:
            self._compute(root)
        # ClusterQueues whose usage add() or remove() changed, for whoever keeps
        # figures over time (``queues.engine.usage_meter``) to read and clear.
        self.touched: set[str] = set()

    @staticmethod
    def _attach(child: Node, parent: Node) -> None:
        child.parent = parent
        parent.children.append(child)

    def _compute(self, node: Node) -> None:
        subtree = {fr: quota.nominal for fr, quota in node.quotas.items()}
        height = 1 if node.is_cohort and node.children else 0
        for child in node.children:
            self._compute(child)
            if child.is_cohort:
                height = max(height, child.height + 1)
            for fr in child.subtree:
                subtree[fr] = subtree.get(fr, 0) + child.lendable(fr)
        node.subtree = subtree
        node.height = height
        node._freeze()

    def add(self, queue: str, usage: Mapping[FlavorResource, int]) -> None:
        node = self.queues[queue]
        self.touched.add(queue)
        for fr, amount in usage.items():
            if amount:
                node.add_usage(fr, amount)

    def remove(self, queue: str, usage: Mapping[FlavorResource, int]) -> None:
        node = self.queues[queue]
        self.touched.add(queue)
        for fr, amount in usage.items():
            if amount:
                node.remove_usage(fr, amount)

    def fits(self, queue: str, usage: Mapping[FlavorResource, int]) -> bool:
        node = self.queues[queue]
        return all(amount <= max(0, node.available(fr)) for fr, amount in usage.items() if amount)
