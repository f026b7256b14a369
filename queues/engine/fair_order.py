"""Kueue's fair-sharing order of a cycle's heads: a tournament within each
root cohort, replayed after every processed head.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar

from queues.engine.assign import Assignment
from queues.engine.fairshare import compare, dominant_resource_share
from queues.engine.model import ClusterQueue, Workload
from queues.engine.quota import Node, QuotaTree


class Head(Protocol):
    """What the order reads of a scheduler's Entry."""

    @property
    def workload(self) -> Workload: ...
    @property
    def queue(self) -> ClusterQueue: ...
    @property
    def assignment(self) -> Assignment | None: ...


EntryLike = TypeVar("EntryLike", bound=Head)


def fair_order(tree: QuotaTree, entries: list[EntryLike]) -> Iterator[EntryLike]:
    """Kueue's fair-sharing tournament: within each root cohort, the entry
    whose subtree is not borrowing, then has the lowest dominant resource
    share, then the highest priority, then the earliest time, wins; shares
    are recomputed after every processed entry."""
    remaining = sorted(entries, key=lambda e: e.queue.name)
    while remaining:
        first = remaining[0]
        node = tree.queues[first.queue.name]
        if node.parent is None:
            remaining.remove(first)
            yield first
            continue
        root = node.root()
        contenders = [e for e in remaining if tree.queues[e.queue.name].root() is root]
        winner = _tournament(tree, root, contenders)
        remaining.remove(winner)
        yield winner


def _tournament(tree: QuotaTree, cohort: Node, entries: list[EntryLike]) -> EntryLike:
    scores: dict[tuple[int, int], tuple[bool, object]] = {}
    for entry in entries:
        usage = entry.assignment.usage if entry.assignment else {}
        queue = tree.queues[entry.queue.name]
        tree.add(queue.name, usage)
        try:
            child: Node = queue
            for ancestor in queue.ancestors():
                borrowing = any(
                    amount > 0 and child.used(fr) > child.subtree.get(fr, 0)
                    for fr, amount in usage.items()
                )
                scores[(id(ancestor), id(entry))] = (borrowing, dominant_resource_share(child))
                child = ancestor
        finally:
            tree.remove(queue.name, usage)

    def beats(a: EntryLike, b: EntryLike, level: Node) -> bool:
        a_borrow, a_share = scores[(id(level), id(a))]
        b_borrow, b_share = scores[(id(level), id(b))]
        if a_borrow != b_borrow:
            return not a_borrow
        order = compare(a_share, b_share)  # type: ignore[arg-type]
        if order:
            return order < 0
        if a.workload.priority != b.workload.priority:
            return a.workload.priority > b.workload.priority
        return a.workload.queue_order_time < b.workload.queue_order_time

    def play(level: Node) -> EntryLike | None:
        candidates: list[EntryLike] = []
        for child in level.children:
            if child.is_cohort:
                winner = play(child)
                if winner is not None:
                    candidates.append(winner)
        for child in level.children:
            if not child.is_cohort:
                candidates.extend(e for e in entries if e.queue.name == child.name)
        best: EntryLike | None = None
        for candidate in candidates:
            if best is None or beats(candidate, best, level):
                best = candidate
        return best

    winner = play(cohort)
    assert winner is not None  # entries is never empty
    return winner
