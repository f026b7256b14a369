"""What both of preemption's victim searches stand on: Kueue's preemption
reasons, a candidate and a target, and the steps classic and fair-sharing
preemption share (who may be a victim, in what order, whether the preemptor
fits once some are gone, which victims to give back). The searches themselves
are in ``queues.engine.preemption`` and ``queues.engine.fair_preemption``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Final

from mypy_extensions import mypyc_attr

from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.model import FlavorResource, Policy, StopPolicy, Workload
from queues.engine.quota import Cell, Node, QuotaTree


class Reason(StrEnum):
    """Kueue's Preempted condition reasons."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


REASON_TEXT: Final = {
    Reason.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    Reason.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    Reason.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    Reason.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


class Variant(Enum):
    WITHIN_QUEUE = "within-queue"
    HIERARCHICAL_RECLAIM = "hierarchical-reclaim"
    RECLAIM_WITHOUT_BORROWING = "reclaim-without-borrowing"
    RECLAIM_WHILE_BORROWING = "reclaim-while-borrowing"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class Target:
    workload: Workload
    reason: Reason

    # Stated, not generated: made by the million (see queues.engine.compiled).
    def __init__(self, workload: Workload, reason: Reason) -> None:
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "reason", reason)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Candidate:
    workload: Workload
    queue: Node
    variant: Variant
    lca: Node | None = None

    def __init__(
        self, workload: Workload, queue: Node, variant: Variant, lca: Node | None = None
    ) -> None:
        self.workload = workload
        self.queue = queue
        self.variant = variant
        self.lca = lca


# A victim search that read the cohort only to find no walk could succeed:
# what it contested and asked for, the candidates it found in the
# preemptor's own queue, the preemptor's queue order time then, and the
# usage of what it asked for at its queue and each cohort above, level by
# level (``usage_along``). Its answer, no victims, holds while that still
# does; the candidates while the queue and that time are as they were (see
# Preemptor.still_without_victims).
HopelessRead = tuple[
    set[FlavorResource], dict[FlavorResource, int], list[Candidate], float, tuple[int, ...]
]


def holds_any(usage: dict[FlavorResource, int], contested: set[FlavorResource]) -> bool:
    """Whether ``usage`` has any of ``contested`` (at any amount). Looked up
    one contested flavor-resource at a time: there are fewer of those than a
    workload holds, and each lookup hashes a (flavor, resource) tuple."""
    for fr in contested:  # noqa: SIM110 - any() over a generator costs more, compiled
        if fr in usage:
            return True
    return False


def usage_along(node: Node, usage: dict[FlavorResource, int]) -> tuple[int, ...]:
    """The usage of ``usage``'s flavor-resources at ``node`` and at each
    cohort above it, level by level."""
    held: list[int] = []
    level: Node | None = node
    while level is not None:
        for fr in usage:
            held.append(level.used(fr))
        level = level.parent
    return tuple(held)


def used_no_less(node: Node, usage: dict[FlavorResource, int], then: tuple[int, ...]) -> bool:
    """Whether every level from ``node`` up uses at least as much of each
    of ``usage``'s flavor-resources as ``then`` (``usage_along``) says.
    Read from each flavor-resource's cells up the tree, one lookup for
    each (``then`` holds a level's figures one after another): asked at
    every admission in a busy cohort, a dict lookup per level and
    flavor-resource was most of it."""
    width = len(usage)
    levels = 0
    level: Node | None = node
    while level is not None:
        levels += 1
        level = level.parent
    if levels * width != len(then):
        # Read along another tree or request: said as such, not as an
        # IndexError from deep in a reused answer's check.
        raise ValueError(_misread(node, levels, then, usage))
    for column, fr in enumerate(usage):
        index = column
        cell: Cell | None = node.cell(fr)
        while cell is not None:
            if cell.used < then[index]:
                return False
            index += width
            cell = cell.parent
    return True


def _misread(
    node: Node, levels: int, then: tuple[int, ...], usage: dict[FlavorResource, int]
) -> str:
    return (
        f"{node.name}: {len(then)} usage figures read for {levels} level(s) × "
        f"{len(usage)} flavor-resource(s); usage_along reads one per level and resource"
    )


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class VictimSearch:
    """The search's state and shared steps, against the scheduler's current usage.

    ``reserved`` maps each ClusterQueue to the workloads holding quota there;
    ``exclude`` are workloads that may not be preempted (admitted earlier in this
    cycle); ``usage_of`` gives a workload's held usage; ``now`` stands in for the
    admission time of workloads that have none."""

    def __init__(
        self,
        policy: Policy,
        tree: QuotaTree,
        reserved: dict[str, dict[str, Workload]],
        usage_of: dict[str, dict[FlavorResource, int]],
        exclude: set[str],
        now: float,
    ) -> None:
        self.policy = policy
        self.tree = tree
        self.reserved = reserved
        self.usage_of = usage_of
        self.exclude = exclude
        self.now = now
        # Whether a search looked past the preemptor's own queue (its cohort,
        # other queues' usage) for candidates: then its answer may change with
        # anything there.
        self.looked_past_queue = False
        # Searches that read the cohort only to find that no walk could
        # succeed (Preemptor._hopeless_at_once): their answer stays "no
        # victims" while that still holds, which
        # Preemptor.still_without_victims asks again.
        self.hopeless_reads: list[HopelessRead] = []
        # Per ClusterQueue, the priorities of the workloads holding quota there
        # and how many of each (SchedulerState.reserved_priorities); None: not
        # known, the queue's workloads are looked at.
        self.reserved_priorities: dict[str, dict[int, int]] | None = None
        # Per ClusterQueue, whether ``reserved`` holds it in admission order and
        # those of its holders being evicted (SchedulerState.held_in_order,
        # evicting_held); None: not known, the first steps are read from
        # every candidate, sorted (FirstCandidates.first_held).
        self.held_in_order: dict[str, bool] | None = None
        self.evicting_held: dict[str, dict[str, Workload]] | None = None
        # False: the classic search never gives up early at the preemptor's
        # borrowing limit (what that shortcut is checked against). A switch, not
        # a method to patch: compiled, the engine would not see the patch.
        self.stop_at_borrowing_limit = True
        # False: the classic search walks its candidates even when no walk could
        # free enough (Preemptor._could_fit; what that shortcut is checked against).
        self.stop_when_hopeless = True
        # Searches that shortcut ended without a walk.
        self.hopeless = 0
        # Classic searches whose first walk succeeded within its first steps
        # (first_candidates.FIRST_STEPS), asked nothing more.
        self.found_in_first_steps = 0
        # Of those, the walks whose first steps were read in order from the
        # newest held (first_held), without gathering the rest.
        self.found_in_order = 0

    @staticmethod
    def _satisfies(policy: str, preemptor: Workload, candidate: Workload) -> bool:
        if policy == "LowerPriority":
            return preemptor.priority > candidate.priority
        if policy == "LowerOrNewerEqualPriority":
            return preemptor.priority > candidate.priority or (
                preemptor.priority == candidate.priority
                and preemptor.queue_order_time < candidate.queue_order_time
            )
        return policy == "Any"

    def _order_key(self, candidate: Candidate, preemptor_queue: str) -> tuple[object, ...]:
        workload = candidate.workload
        admitted = workload.admitted_at if workload.admitted_at is not None else self.now
        return (
            not workload.evicting,
            candidate.queue.name == preemptor_queue,
            workload.priority,
            -admitted,
            workload.key,
        )

    def _ordered(self, lists: list[list[Candidate]]) -> list[Candidate]:
        """Each list in ``_order_key``'s order, those being evicted of every
        list first. Within one list every candidate is in the preemptor's
        queue or none is (``_classic``'s lists), so the order is lowest
        priority, then latest admitted, then key: sorted as plain tuples built
        in a loop (the position breaks no tie, keys being unique), not with a
        key function called for each (a quarter of a busy cohort's search
        time went to that sort)."""
        evicting: list[Candidate] = []
        rest: list[Candidate] = []
        now = self.now
        for candidates in lists:
            first: list[tuple[int, float, str, int]] = []
            then: list[tuple[int, float, str, int]] = []
            for index, candidate in enumerate(candidates):
                workload = candidate.workload
                admitted = workload.admitted_at
                keyed = (
                    workload.priority,
                    -(admitted if admitted is not None else now),
                    workload.key,
                    index,
                )
                (first if workload.evicting else then).append(keyed)
            first.sort()
            then.sort()
            evicting.extend([candidates[keyed[3]] for keyed in first])
            rest.extend([candidates[keyed[3]] for keyed in then])
        return evicting + rest

    def _remove(self, candidate: Candidate) -> None:
        self.tree.remove(candidate.queue.name, self.usage_of[candidate.workload.key])

    def _restore(self, candidate: Candidate) -> None:
        self.tree.add(candidate.queue.name, self.usage_of[candidate.workload.key])

    def _fits(self, queue: Node, usage: dict[FlavorResource, int], allow_borrowing: bool) -> bool:
        for fr, amount in usage.items():
            if not amount:
                continue
            if not allow_borrowing and queue.borrowing_with(fr, amount):
                return False
            if amount > max(0, queue.available(fr)):
                return False
        return True

    def _fill_back(
        self,
        targets: list[Candidate],
        queue: Node,
        usage: dict[FlavorResource, int],
        allow_borrowing: bool,
    ) -> list[Candidate]:
        """Give back victims that are not needed: walk them in reverse (the last
        one stays), re-adding each; keep it out only if the preemptor then no
        longer fits. Swap-delete, as Kueue does, so the order is not removal order."""
        kept = list(targets)
        for i in range(len(kept) - 2, -1, -1):
            self._restore(kept[i])
            if self._fits(queue, usage, allow_borrowing):
                kept[i] = kept[-1]
                kept.pop()
            else:
                self._remove(kept[i])
        return kept

    def _using(
        self, queue: str, preemptor: Workload, contested: set[FlavorResource]
    ) -> list[Workload]:
        """Workloads holding quota in ``queue`` that could be victims, in the
        order they hold it: those using some contested flavor-resource, other
        than the preemptor and those excluded. A stopped queue is not in
        Kueue's snapshot: its usage counts, its workloads are never
        candidates. A plain loop: asked for every queue borrowing in a busy
        cohort at each search, a generator and a set test against each
        holder's whole usage were most of gathering its candidates."""
        if self.policy.cluster_queues[queue].stop_policy is not StopPolicy.NONE:
            return []
        held = self.reserved.get(queue)
        if not held:
            return []
        skip = preemptor.key
        exclude = self.exclude
        usage_of = self.usage_of
        using: list[Workload] = []
        for key, workload in held.items():
            if key == skip or key in exclude:
                continue
            if holds_any(usage_of[key], contested):
                using.append(workload)
        return using


rebuilt_by_fields(Target)
