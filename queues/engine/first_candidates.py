"""The first steps of a classic victim search, read in order without
gathering and sorting every candidate.

Most searches that get as far as ordering their candidates take their victims
within the first walk's first few steps (``FIRST_STEPS``), out of the hundreds
of workloads their cohort's borrowing queues hold; gathering and sorting them
all was most of a busy replay's search time. A queue whose workloads were
held in the order of their admission times (``SchedulerState.held_in_order``)
and at one priority gives its candidates in the search's order from the
newest end of what it holds, and the few being evicted (which go first) are
kept apart (``SchedulerState.evicting_held``). Where that is not known, or the
first steps find no victims, ``Preemptor._classic`` gathers and sorts them
all, as before; ``Scheduler.first_held_in_order`` turns this off, and the
tests hold the two to the same answers.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Final

from mypy_extensions import mypyc_attr

from queues.engine.fair_preemption import FairSharingSearch
from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    FlavorResource,
    StopPolicy,
    Workload,
)
from queues.engine.queueing import last_put
from queues.engine.quota import Node
from queues.engine.victim_search import Candidate, Variant, holds_any

# How many candidates a classic search's first walk looks at before the
# search asks whether any walk could succeed: of the walks that succeed in a
# busy month, nine in ten take their last victim among the first three.
FIRST_STEPS: Final = 4

# Where a candidate stands in ``VictimSearch._ordered``'s order among those of
# its list being evicted, or not: priority, then the latest admitted, then key.
Rank = tuple[int, float, str]
# A candidate with its rank, queue and the cohort it was gathered at.
Ranked = tuple[Rank, Workload, Node, Node]
# A queue ranked by its newest held: none of its candidates stands before it.
Bound = tuple[Rank, Node, Node]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class FirstCandidates(FairSharingSearch):
    """The classic search's first steps read in order (``first_in_order``),
    and who a candidate of another queue reclaims as (``_variant``)."""

    def first_in_order(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        sources: list[tuple[Node, Node, bool]],
        same: list[Candidate],
        contested: set[FlavorResource],
    ) -> tuple[list[Candidate], bool, bool] | None:
        """The first FIRST_STEPS candidates ``_ordered`` would give the
        search gathering from ``sources`` (each queue with the cohort it is
        gathered at and whether its candidates reclaim hierarchically) and
        its own queue's ``same``, and whether any candidate reclaims
        hierarchically, or by priority (what ``_attempts`` asks); None where
        that cannot be known so. Those being evicted go first, from every
        list (``evicting_among``, and ``same``'s), then each list's others
        (``_first_of_list``), then ``same``'s."""
        if self.evicting_held is None:
            return None
        reclaim = queue.preemption.reclaim_within_cohort.value
        now = self.now
        prefix: list[Candidate] = []
        found = [False, False]
        for index, hierarchical in enumerate((True, False)):
            ranked: list[Ranked] = []
            for other, ancestor, advantaged in sources:
                if advantaged is hierarchical:
                    for w in self.evicting_among(other.name, preemptor, contested, reclaim):
                        ranked.append((rank_of(w, now), w, other, ancestor))
            ranked.sort(key=_by_rank)
            found[index] = bool(ranked)
            prefix.extend(self._candidates(ranked, hierarchical, preemptor, queue))
        if any(candidate.workload.evicting for candidate in same):
            prefix.extend(c for c in self._ordered([same]) if c.workload.evicting)
        del prefix[FIRST_STEPS:]
        for index, hierarchical in enumerate((True, False)):
            want = FIRST_STEPS - len(prefix)
            if want <= 0 and (found[0] or (index == 1 and found[1])):
                break  # neither the steps nor the attempts need more
            # With no steps left, only whether the list has any.
            firsts = self._first_of_list(
                sources, hierarchical, preemptor, contested, reclaim, max(want, 1)
            )
            if firsts is None:
                return None
            found[index] = found[index] or bool(firsts)
            if want > 0:
                prefix.extend(self._candidates(firsts[:want], hierarchical, preemptor, queue))
        if len(prefix) < FIRST_STEPS:
            rest = [c for c in self._ordered([same]) if not c.workload.evicting]
            prefix.extend(rest[: FIRST_STEPS - len(prefix)])
        return prefix, found[0], found[1]

    def _first_of_list(
        self,
        sources: list[tuple[Node, Node, bool]],
        hierarchical: bool,
        preemptor: Workload,
        contested: set[FlavorResource],
        rule: str,
        count: int,
    ) -> list[Ranked] | None:
        """The first ``count`` candidates not being evicted (fewer if there
        are not as many) of the queues of ``sources`` whose candidates do, or
        do not, reclaim hierarchically, ranked. Each queue's newest held
        bounds where its candidates can stand, so the queues are read in that
        order, and no further once the next could not place one among the
        first ``count``: a busy cohort has tens of borrowing queues, and a
        search's first steps are in one or two of them."""
        in_order = self.held_in_order
        priorities = self.reserved_priorities
        evicting = self.evicting_held
        if in_order is None or priorities is None or evicting is None:
            return None
        reserved = self.reserved
        cluster_queues = self.policy.cluster_queues
        now = self.now
        bounds: list[Bound] = []
        for other, ancestor, advantaged in sources:
            if advantaged is not hierarchical:
                continue
            name = other.name
            held = reserved.get(name)
            if not held or cluster_queues[name].stop_policy is not StopPolicy.NONE:
                continue  # no candidates there
            held_at = priorities[name]
            if not in_order[name] or len(held_at) != 1:
                return None
            # Before every candidate there: others may have come at the same
            # time with smaller keys.
            newest = last_put(held)
            priority, admitted, _ = rank_of(newest, now)
            bounds.append(((priority, admitted, ""), other, ancestor))
        bounds.sort(key=_by_rank)
        ranked: list[Ranked] = []
        for bound, other, ancestor in bounds:
            if len(ranked) >= count and bound > ranked[count - 1][0]:
                break
            name = other.name
            first = self.first_held(
                reserved[name], bound[0], evicting[name], preemptor, contested, rule, count
            )
            if first is None:
                return None
            if first:
                ranked.extend((rank_of(w, now), w, other, ancestor) for w in first)
                ranked.sort(key=_by_rank)
        return ranked[:count]

    def first_held(
        self,
        held: dict[str, Workload],
        priority: int,
        leaving: dict[str, Workload],
        preemptor: Workload,
        contested: set[FlavorResource],
        rule: str,
        need: int,
    ) -> list[Workload] | None:
        """At least the first ``need`` (all, if fewer) of ``_using``'s
        workloads in a queue that holds ``held`` in admission order, all at
        ``priority``, that are not being evicted (``leaving``) and that
        ``rule`` lets ``preemptor`` take, the latest admitted first, read
        from the newest end: with every other admitted when the last one
        was, as ``_ordered`` orders those by key (the caller ranks them).
        None: some holder is marked evicting where ``leaving`` did not see
        it, so the order is not known."""
        if rule == "LowerPriority" and priority >= preemptor.priority:
            return []  # one priority held, none of it lower
        skip = preemptor.key
        exclude = self.exclude
        usage_of = self.usage_of
        found: list[Workload] = []
        for workload in reversed(held.values()):
            if len(found) >= need and workload.admitted_at != found[-1].admitted_at:
                return found
            key = workload.key
            if workload.evicting:
                if key not in leaving:
                    return None  # marked where evicting_held did not see it
                continue
            if key == skip or key in exclude or not holds_any(usage_of[key], contested):
                continue
            if self._satisfies(rule, preemptor, workload):
                found.append(workload)
        return found

    def evicting_among(
        self, queue: str, preemptor: Workload, contested: set[FlavorResource], rule: str
    ) -> list[Workload]:
        """``_using``'s workloads in ``queue`` that are being evicted and that
        ``rule`` lets ``preemptor`` take (few, and in no order)."""
        leaving = self.evicting_held
        if leaving is None or not leaving[queue]:
            return []
        if self.policy.cluster_queues[queue].stop_policy is not StopPolicy.NONE:
            return []
        skip = preemptor.key
        return [
            workload
            for key, workload in leaving[queue].items()
            if key != skip
            and key not in self.exclude
            and holds_any(self.usage_of[key], contested)
            and self._satisfies(rule, preemptor, workload)
        ]

    def _candidates(
        self, ranked: list[Ranked], hierarchical: bool, preemptor: Workload, queue: ClusterQueue
    ) -> list[Candidate]:
        return [
            Candidate(workload, other, self._variant(hierarchical, preemptor, workload, queue), at)
            for _, workload, other, at in ranked
        ]

    @staticmethod
    def _variant(
        advantaged: bool, preemptor: Workload, candidate: Workload, queue: ClusterQueue
    ) -> Variant:
        if advantaged:
            return Variant.HIERARCHICAL_RECLAIM
        borrow = queue.preemption
        if borrow.borrow_within_cohort is BorrowWithinCohort.NEVER:
            return Variant.RECLAIM_WITHOUT_BORROWING
        if candidate.priority >= preemptor.priority:
            return Variant.RECLAIM_WITHOUT_BORROWING
        threshold = borrow.max_priority_threshold
        if threshold is not None and candidate.priority > threshold:
            return Variant.RECLAIM_WITHOUT_BORROWING
        return Variant.RECLAIM_WHILE_BORROWING


def rank_of(workload: Workload, now: float) -> Rank:
    admitted = workload.admitted_at
    return (workload.priority, -(admitted if admitted is not None else now), workload.key)


# Ranked and Bound tuples sort by their rank alone: a key function that
# compiled code calls through its Python entry point for every item is
# dearer than the C one.
_by_rank: Final = itemgetter(0)
