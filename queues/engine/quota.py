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

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queues.engine.model import FlavorResource, Policy, Quota, flavor_resource

# Past any usage (``Node.steady_between``'s open ends); small enough for a
# compiled int.
UNBOUNDED: Final = 1 << 60


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Cell:
    """One node's figures for one flavor-resource: its usage (which alone
    keeps it: ``Node.used``, ``Node.usage``) and the static
    figures the quota checks read of it, beside its parent's cell. A quota
    check reads a dozen figures of one flavor-resource along the path to
    the root; looked up once as a cell, each is a field read, not a dict
    lookup hashing the flavor-resource's tuple."""

    def __init__(self, node: Node, fr: FlavorResource, parent: Cell | None) -> None:
        self.node = node
        self.fr = fr
        self.parent = parent
        # Usage is written only through cells: a node holds none of ``fr``
        # before its cell is made.
        self.used = 0
        # Whether it is among its node's written cells (``Node.usage``).
        self.written = False
        self.subtree = node.subtree.get(fr, 0)
        quota = node.quotas.get(fr)
        self.nominal = quota.nominal if quota is not None else 0
        self.local = _kept_locally(self.subtree, quota)
        self.lendable = self.subtree - self.local
        borrowing = quota.borrowing_limit if quota is not None else None
        self.limited = borrowing is not None
        self.limit = borrowing if borrowing is not None else 0
        # The most the node could ever use, with nothing running anywhere.
        if parent is None:
            self.potential = self.subtree
        else:
            self.potential = self.local + parent.potential
            if borrowing is not None:
                self.potential = min(self.potential, self.subtree + borrowing)

    def borrowing_limit(self) -> int | None:
        return self.limit if self.limited else None

    def local_available(self) -> int:
        return max(0, self.local - self.used)

    def parent_limit(self) -> int:
        """The most its borrowing limit lets it take from its parent, its
        own usage as it is (what it lends, less what it already takes
        beyond its local quota, plus the limit); for a limited node."""
        return self.lendable - max(0, self.used - self.local) + self.limit

    def available(self) -> int:
        """What the node could still take (negative when over-admitted)."""
        used = self.used
        parent = self.parent
        if parent is None:
            return self.subtree - used
        from_parent = parent.available()
        if self.limited:
            # parent_limit(), written out: asked at every quota check.
            from_parent = min(from_parent, self.lendable - max(0, used - self.local) + self.limit)
        return max(0, self.local - used) + from_parent

    def steady_between(self) -> tuple[int, int] | None:
        """Node.steady_between, for this flavor-resource."""
        parent = self.parent
        if parent is None or parent.parent is not None:
            return None
        total = parent.subtree
        from_parent = total - parent.used
        own = self.local_available()
        if self.limited:
            limit = self.parent_limit()
            if own + limit <= 0:
                return -UNBOUNDED, UNBOUNDED
            if from_parent >= limit:
                return -UNBOUNDED, total - limit
        if own + from_parent <= 0:
            return total + own, UNBOUNDED
        return None

    def fits_between(self, amount: int, fits: bool) -> tuple[int, int]:
        """The range of its parent's usage over which ``amount`` fits in
        what this node could still take (``available``, from 0 up), as
        ``fits`` says it did when read, or does not, its own usage as it
        was then (and is); for a node right below a root. Wider than
        ``steady_between``: the room may move in it, an answer that reads
        only whether requests fit does not.

        The room is ``own + min(total − parent usage, limit)``: ``amount``
        fits while the parent's usage leaves it ``amount − own``, and
        never when the limit leaves less, or always when it asks nothing."""
        parent = self.parent
        if parent is None or parent.parent is not None:
            raise ValueError(f"{self.node.name}: fits_between is for a node right below a root")
        if amount <= 0 or amount > self.potential:
            return -UNBOUNDED, UNBOUNDED
        wanted = amount - self.local_available()
        if self.limited and self.parent_limit() < wanted:
            return -UNBOUNDED, UNBOUNDED
        edge = parent.subtree - wanted  # the most the parent may use for it to fit
        return (-UNBOUNDED, edge) if fits else (edge + 1, UNBOUNDED)

    def borrowing_with(self, amount: int) -> bool:
        """A ClusterQueue compares with its nominal quota, a Cohort with its subtree."""
        limit = self.subtree if self.node.is_cohort else self.nominal
        return limit < self.used + amount

    def borrowing_level(self, amount: int) -> tuple[int, bool]:
        """Node.borrowing_level, for this flavor-resource."""
        parent = self.parent
        if parent is None or not self.borrowing_with(amount):
            return 0, parent is not None
        remaining = amount - self.local_available()
        ancestor = parent
        while ancestor.parent is not None:
            if not ancestor.borrowing_with(remaining):
                return ancestor.node.height, True
            remaining -= ancestor.local_available()
            ancestor = ancestor.parent
        # At the root, borrowing or not, there is nothing above to reclaim from
        # (asked for every read of every waiting head: not worked out).
        return ancestor.node.height, False

    def add(self, amount: int) -> None:
        """Add usage; the part beyond unused local quota bubbles to the parent."""
        cell: Cell | None = self
        while cell is not None:
            used = cell.used
            spare = max(0, cell.local - used)
            cell.used = used + amount
            node = cell.node
            if not cell.written:
                cell.written = True
                node.written.append(cell)
            # Over the subtree quota is in ``over`` (only here and below): a
            # set test hashes the flavor-resource, asked only where it moves.
            if used <= cell.subtree < used + amount:
                node.over.add(cell.fr)
            if amount <= spare:
                return
            amount -= spare
            cell = cell.parent

    def remove(self, amount: int) -> None:
        cell: Cell | None = self
        while cell is not None:
            used = cell.used
            stored_in_parent = used - cell.local
            cell.used = used - amount
            node = cell.node
            if not cell.written:
                cell.written = True
                node.written.append(cell)
            if used > cell.subtree >= used - amount:
                node.over.discard(cell.fr)
            if stored_in_parent <= 0:
                return
            amount = min(amount, stored_in_parent)
            cell = cell.parent


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class CellReading:
    """What a quota check read of a queue's cell
    (``assign.FlavorAssigner._fits_quota``): the flavor-resource, the
    amount checked, the room found, the borrowing level and whether
    reclaiming could help (None: not worked out), the range of the
    parent's usage over which the room stays what it is
    (``Cell.steady_between``; ``steady_low`` above ``steady_high``: none
    known), and the cell, read from again without looking it up. Fields,
    not a tuple: compiled, a tuple's ints are unboxed at every reading,
    and a nomination read again (``NominationMemory._read_again``) reads
    each of its readings at every change in its tree."""

    def __init__(
        self,
        fr: FlavorResource,
        value: int,
        available: int,
        level: tuple[int, bool] | None,
        steady: tuple[int, int] | None,
        cell: Cell,
    ) -> None:
        self.fr = fr
        self.value = value
        self.available = available
        self.level = level
        self.steady_low, self.steady_high = (1, 0) if steady is None else steady
        self.cell = cell

    def steady(self) -> tuple[int, int] | None:
        """The range as ``Cell.steady_between`` gave it (None: none, or
        an empty one, which no usage is in either)."""
        low, high = self.steady_low, self.steady_high
        return None if low > high else (low, high)

    def asked(self) -> tuple[FlavorResource, int, int, tuple[int, bool] | None]:
        """What the check asked and found, without the range (a reused
        answer's is from when it was first asked)."""
        return self.fr, self.value, self.available, self.level

    def __repr__(self) -> str:
        return f"CellReading{(*self.asked(), self.steady())}"


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
    # Its cells that have been written (Cell.add, Cell.remove), in the
    # order first written: what ``usage`` reads.
    written: list[Cell] = field(default_factory=list, repr=False)
    height: int = 0
    # The flavor-resources whose usage is above the subtree quota, kept as usage
    # changes: the victim search asks every queue of a cohort whether it
    # borrows, once per search, and that is a set test instead of a loop.
    over: set[FlavorResource] = field(default_factory=set, repr=False)
    # Per flavor-resource asked of it since the tree was built, its Cell.
    cells: dict[FlavorResource, Cell] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return f"{'Cohort' if self.is_cohort else 'ClusterQueue'}({self.name})"

    @property
    def usage(self) -> dict[FlavorResource, int]:
        """Its usage of every flavor-resource its cells have written (0
        where all was given back), in the order first written. Worked out
        from the cells, which alone keep it: a dict written beside them at
        every add and remove, hashing the flavor-resource each time, was 2%
        of a replay. The engine's own readers ask ``used``."""
        return {cell.fr: cell.used for cell in self.written}

    def used(self, fr: FlavorResource) -> int:
        """Its usage of ``fr``."""
        cell = self.cells.get(fr)
        return cell.used if cell is not None else 0

    def cell(self, fr: FlavorResource) -> Cell:
        """The node's cell for ``fr``, made on first asking (once the tree's
        subtree quotas are worked out: its figures are read then)."""
        known = self.cells.get(fr)
        if known is not None:
            return known
        parent = self.parent
        made = Cell(self, fr, parent.cell(fr) if parent is not None else None)
        self.cells[fr] = made
        return made

    # ------------------------------------------------------------ quota figures

    def nominal(self, fr: FlavorResource) -> int:
        return self.cell(fr).nominal

    def borrowing_limit(self, fr: FlavorResource) -> int | None:
        return self.cell(fr).borrowing_limit()

    def lending_limit(self, fr: FlavorResource) -> int | None:
        quota = self.quotas.get(fr)
        return quota.lending_limit if quota else None

    def local_quota(self, fr: FlavorResource) -> int:
        """What the node keeps for its own subtree and never lends upward."""
        return self.cell(fr).local

    def local_available(self, fr: FlavorResource) -> int:
        return self.cell(fr).local_available()

    def lendable(self, fr: FlavorResource) -> int:
        """What the node puts into its parent's pool."""
        return self.cell(fr).lendable

    def available(self, fr: FlavorResource) -> int:
        """What this node could still take for ``fr`` (negative when over-admitted)."""
        return self.cell(fr).available()

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
        return self.cell(fr).steady_between()

    def potential_available(self, fr: FlavorResource) -> int:
        """The most this node could ever use, with nothing running anywhere: a
        request above this never fits, whatever is preempted (quotas do not
        change during a tree's life: kept in its cell)."""
        return self.cell(fr).potential

    def borrowing_with(self, fr: FlavorResource, amount: int) -> bool:
        """A ClusterQueue compares with its nominal quota, a Cohort with its subtree."""
        return self.cell(fr).borrowing_with(amount)

    def within_nominal(self, frs: set[FlavorResource]) -> bool:
        over = self.over
        # Compiled, isdisjoint is a method looked up by name: most nodes
        # are within their quota, asked by every victim search.
        return not over or over.isdisjoint(frs)

    # ---------------------------------------------------------------- mutation

    def add_usage(self, fr: FlavorResource, amount: int) -> None:
        """Add usage; the part beyond unused local quota bubbles to the parent."""
        self.cell(fr).add(amount)

    def remove_usage(self, fr: FlavorResource, amount: int) -> None:
        self.cell(fr).remove(amount)

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
        return self.cell(fr).borrowing_level(amount)


def _kept_locally(subtree: int, quota: Quota | None) -> int:
    """What a node keeps of its subtree quota for itself and never lends
    upward: what is beyond its lendingLimit; without one, nothing."""
    if quota is None or quota.lending_limit is None:
        return 0
    return max(0, subtree - quota.lending_limit)


def _lendable(node: Node, fr: FlavorResource) -> int:
    """What ``node`` puts into its parent's pool (``Cell.lendable``), read
    while the tree is built, before any cell is made: a cell reads its
    parent's subtree quota, worked out after its children's."""
    subtree = node.subtree.get(fr, 0)
    return subtree - _kept_locally(subtree, node.quotas.get(fr))


def _quotas(groups: Any) -> dict[FlavorResource, Quota]:
    quotas: dict[FlavorResource, Quota] = {}
    for group in groups:
        for fq in group.flavors:
            for resource, quota in fq.resources.items():
                quotas[flavor_resource(fq.flavor, resource)] = quota
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
                subtree[fr] = subtree.get(fr, 0) + _lendable(child, fr)
        node.subtree = subtree
        node.height = height

    def add(self, queue: str, usage: dict[FlavorResource, int]) -> None:
        node = self.queues[queue]
        self.touched.add(queue)
        for fr, amount in usage.items():
            if amount:
                node.add_usage(fr, amount)

    def remove(self, queue: str, usage: dict[FlavorResource, int]) -> None:
        node = self.queues[queue]
        self.touched.add(queue)
        for fr, amount in usage.items():
            if amount:
                node.remove_usage(fr, amount)

    def fits(self, queue: str, usage: dict[FlavorResource, int]) -> bool:
        node = self.queues[queue]
        return all(amount <= max(0, node.available(fr)) for fr, amount in usage.items() if amount)
