"""Choosing preemption victims, as Kueue v0.19 does.

Classic preemption collects candidates in the preemptor's queue
(``withinClusterQueue``) and, walking up the cohort tree, in queues using more
than their nominal quota in the contested flavor-resources
(``reclaimWithinCohort``, ``borrowWithinCohort`` with its priority threshold);
orders them (other queues first, lower priority first, most recently admitted
first); removes them one by one until the preemptor fits; then gives back every
victim that turned out not to be needed. Fair-sharing preemption instead picks
victims from the queues with the highest dominant resource share, as long as the
preemptor's share stays at or below theirs (``queues.engine.fair_preemption``).

The tree is changed while simulating and always restored before returning.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from mypy_extensions import mypyc_attr

from queues.engine.first_candidates import FIRST_STEPS, FirstCandidates
from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    FlavorResource,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
    Workload,
)
from queues.engine.quota import Node
from queues.engine.victim_search import (
    REASON_TEXT,
    Candidate,
    HopelessRead,
    Reason,
    Target,
    Variant,
    usage_along,
    used_no_less,
)

# approvals.lifecycle reads Kueue's reasons here, where they were defined first.
__all__ = ["REASON_TEXT", "Preemptor", "Reason"]


def _not_lower(rule: str, preemptor: Workload, holder: Workload) -> str:
    said = f"priority {holder.priority} is not lower than {preemptor.priority}"
    if rule == "LowerOrNewerEqualPriority" and holder.priority == preemptor.priority:
        return f"{said} and it is not newer"
    return said


_VARIANT_REASON: Final = {
    Variant.WITHIN_QUEUE: Reason.IN_CLUSTER_QUEUE,
    Variant.HIERARCHICAL_RECLAIM: Reason.IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WITHOUT_BORROWING: Reason.IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WHILE_BORROWING: Reason.IN_COHORT_RECLAIM_WHILE_BORROWING,
}


def hopeless_as_used(node: Node, preemptor: Workload, read: HopelessRead) -> bool:
    """Whether a hopeless search (``read``) of a reused nomination, its
    queue's version unchanged, would be hopeless again, known from usage
    alone: the preemptor's queue order time as it was (so its own
    candidates are too) and no level from its queue up using less of what it
    asked for than then. With more used above it, no test of
    ``_hopeless_at_once`` turns: the request fits the quota of no level
    (``_fit_in_quota``: a level's room only shrinks), and it fits nowhere
    with its own candidates gone (``_could_fit``: what a queue may take only
    shrinks as usage above it grows). That last test takes its own
    candidates out of the tree: below a cohort under another, what leaves
    the upper cohort then depends on how much the middle one holds, so with
    candidates this holds only where the queue's cohort is a root.
    Otherwise ``still_without_victims`` asks again. A StrictFIFO gang
    waiting in a busy cohort, whose tree only fills between its finishes, is
    asked this at every admission there."""
    if preemptor.queue_order_time != read[3]:
        return False
    parent = node.parent
    if read[2] and parent is not None and parent.parent is not None:
        return False
    return used_no_less(node, read[1], read[4])


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Preemptor(FirstCandidates):
    """Finds victims against the scheduler's current usage: the classic search
    here, its first steps read in order in ``FirstCandidates``, fair sharing's
    in ``FairSharingSearch``, the shared steps and the arguments in
    ``VictimSearch``."""

    def protection(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        holder: Workload,
        contested: set[FlavorResource],
    ) -> str | None:
        """Why ``holder`` (in ``queue`` or a queue of its cohort) may not be a
        victim of ``preemptor`` (None: it may). The same rules ``_classic``
        gathers candidates by, said in words."""
        if self.policy.cluster_queues[holder.cluster_queue].stop_policy is not StopPolicy.NONE:
            return f"cluster queue {holder.cluster_queue} is stopped"
        policy = queue.preemption
        if holder.cluster_queue == queue.name:
            rule = policy.within_cluster_queue.value
            if policy.within_cluster_queue is WithinClusterQueue.NEVER:
                return "withinClusterQueue is Never"
            if not self._satisfies(rule, preemptor, holder):
                return _not_lower(rule, preemptor, holder)
            return None
        other = self.tree.queues[holder.cluster_queue]
        if policy.reclaim_within_cohort is ReclaimWithinCohort.NEVER:
            return "reclaimWithinCohort is Never"
        if other.within_nominal(contested):
            return f"cluster queue {holder.cluster_queue} is within its nominal quota"
        if not self._satisfies(policy.reclaim_within_cohort.value, preemptor, holder):
            return _not_lower(policy.reclaim_within_cohort.value, preemptor, holder)
        return None

    # -------------------------------------------------------------- dispatch

    def targets(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        contested: set[FlavorResource],
        usage: dict[FlavorResource, int],
    ) -> list[Target]:
        if not contested:
            return []
        if self.policy.fair_sharing:
            self.looked_past_queue = True
            return self._fair(preemptor, queue, contested, usage)
        return self._classic(preemptor, queue, contested, usage)

    # --------------------------------------------------------------- classic

    def _classic(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        contested: set[FlavorResource],
        usage: dict[FlavorResource, int],
    ) -> list[Target]:
        node = self.tree.queues[queue.name]
        policy = queue.preemption
        same = self._same_queue_candidates(preemptor, queue, contested)
        if self.stop_at_borrowing_limit and self._beyond_borrowing_limit(node, usage, same):
            return []
        if self._hopeless_at_once(queue, usage, contested, same):
            self.hopeless += 1
            along = usage_along(node, usage)
            read = (set(contested), dict(usage), same, preemptor.queue_order_time, along)
            self.hopeless_reads.append(read)
            return []
        self.looked_past_queue = True
        sources: list[tuple[Node, Node, bool]] = []
        if (
            node.parent is not None
            and policy.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
        ):
            sources = self._cohort_sources(node, usage, contested)
        # The first walk's first steps read in order without gathering every
        # candidate (first_candidates), where what each queue holds shows where
        # its candidates start.
        first = self.first_in_order(preemptor, queue, sources, same, contested)
        if first is not None:
            prefix, has_hierarchy, has_by_priority = first
            borrowing = self._attempts(
                policy.borrow_within_cohort, has_hierarchy, has_by_priority, node, contested
            )[0]
            found = self._greedy(prefix, node, usage, contested, borrowing, FIRST_STEPS)
            if found:
                self.found_in_first_steps += 1
                self.found_in_order += 1
                return _targets(found)
        hierarchy, by_priority = self._gathered(preemptor, queue, sources, contested)
        attempts = self._attempts(
            policy.borrow_within_cohort, bool(hierarchy), bool(by_priority), node, contested
        )
        ordered = self._ordered([hierarchy, by_priority, same])
        # The first walk's first steps, before asking whether any walk could
        # succeed: most walks that do stop within them, and that question
        # goes through every candidate. A walk is its prefixes, so one that
        # stops there is the whole first walk, which nothing asked before it.
        # Already walked when read in order above.
        if first is None:
            found = self._greedy(ordered, node, usage, contested, attempts[0], FIRST_STEPS)
            if found:
                self.found_in_first_steps += 1
                return _targets(found)
        if self.stop_when_hopeless and not any(
            self._could_fit(node, usage, contested, ordered, allowed) for allowed in attempts
        ):
            self.hopeless += 1
            return []
        for index, allow_borrowing in enumerate(attempts):
            if index == 0 and len(ordered) <= FIRST_STEPS:
                continue  # walked whole above
            found = self._greedy(ordered, node, usage, contested, allow_borrowing)
            if found:
                return _targets(found)
        return []

    def _gathered(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        sources: list[tuple[Node, Node, bool]],
        contested: set[FlavorResource],
    ) -> tuple[list[Candidate], list[Candidate]]:
        """Every candidate of ``sources`` (``_cohort_sources``), those that
        reclaim hierarchically and those that reclaim by priority, unordered."""
        reclaim = queue.preemption.reclaim_within_cohort.value
        hierarchy: list[Candidate] = []
        by_priority: list[Candidate] = []
        for other, ancestor, advantaged in sources:
            for workload in self._using(other.name, preemptor, contested):
                if not self._satisfies(reclaim, preemptor, workload):
                    continue
                variant = self._variant(advantaged, preemptor, workload, queue)
                candidate = Candidate(workload, other, variant, ancestor)
                (hierarchy if advantaged else by_priority).append(candidate)
        return hierarchy, by_priority

    def _cohort_sources(
        self, node: Node, usage: dict[FlavorResource, int], contested: set[FlavorResource]
    ) -> list[tuple[Node, Node, bool]]:
        """The queues of the cohort whose workloads may be candidates, walking
        up the tree: each with the cohort it is gathered at and whether the
        request fits the quota below that level (its candidates then reclaim
        hierarchically)."""
        sources: list[tuple[Node, Node, bool]] = []
        advantaged, remaining = self._fit_in_quota(node, usage)
        previous: Node = node
        for ancestor in node.ancestors():
            for other in self._borrowing_queues(ancestor, skip=previous, contested=contested):
                if other is not node:
                    sources.append((other, ancestor, advantaged))
            fits, remaining = self._fit_in_quota(ancestor, remaining)
            advantaged = advantaged or fits
            previous = ancestor
        return sources

    def still_without_victims(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        read: HopelessRead,
    ) -> bool:
        """Whether the classic search of ``read`` (in ``hopeless_reads``)
        would again end before gathering a candidate past the preemptor's
        queue: at its borrowing limit, or hopeless at once. It then gives the
        same answer, no victims, without being run.

        Asked while the preemptor's queue is as it was (a reused
        nomination's version): its own candidates are those the search found,
        unless its queue order time moved, and the search stopped short of
        the borrowing limit then, so it would now."""
        contested, usage, same, ordered_at, _ = read
        if preemptor.queue_order_time != ordered_at:
            same = self._same_queue_candidates(preemptor, queue, contested)
            node = self.tree.queues[queue.name]
            if self.stop_at_borrowing_limit and self._beyond_borrowing_limit(node, usage, same):
                return True
        return self._hopeless_at_once(queue, usage, contested, same)

    def _same_queue_candidates(
        self, preemptor: Workload, queue: ClusterQueue, contested: set[FlavorResource]
    ) -> list[Candidate]:
        policy = queue.preemption.within_cluster_queue
        if policy is WithinClusterQueue.NEVER:
            return []
        if policy is WithinClusterQueue.LOWER_PRIORITY and self._none_lower(
            queue.name, preemptor.priority
        ):
            return []
        node = self.tree.queues[queue.name]
        return [
            Candidate(workload, node, Variant.WITHIN_QUEUE)
            for workload in self._using(queue.name, preemptor, contested)
            if self._satisfies(policy.value, preemptor, workload)
        ]

    def _none_lower(self, queue: str, priority: int) -> bool:
        """Whether no workload holding quota in ``queue`` has a priority
        below ``priority``, known without looking at them: a queue of one
        priority class (interactive work at 0, a month of it running in a
        big team's queue) is asked at every search there."""
        known = self.reserved_priorities
        if known is None:
            return False
        held = known.get(queue)
        return held is not None and all(held_at >= priority for held_at in held)

    def _hopeless_at_once(
        self,
        queue: ClusterQueue,
        usage: dict[FlavorResource, int],
        contested: set[FlavorResource],
        same: list[Candidate],
    ) -> bool:
        """Whether no walk can succeed, whoever borrows in the cohort (see
        _could_fit), before gathering the cohort's candidates: the preemptor
        may not preempt while borrowing, fits below no level of the tree, and
        would borrow even with every candidate of its own queue gone."""
        node = self.tree.queues[queue.name]
        return (
            self.stop_when_hopeless
            and queue.preemption.borrow_within_cohort is BorrowWithinCohort.NEVER
            and not self._advantaged_below_some_level(node, usage)
            and self._borrows_still(node, usage, same)
            and not self._could_fit(node, usage, contested, same, True)
        )

    def _beyond_borrowing_limit(
        self, node: Node, usage: dict[FlavorResource, int], same: list[Candidate]
    ) -> bool:
        """Whether the preemptor would exceed its queue's borrowing limit even
        with every candidate of its own queue gone: then no set of victims lets
        it fit, and the cohort need not be searched. A queue never holds more
        than its nominal quota plus its borrowing limit, and victims in other
        queues only give its cohort room, never the queue more limit. Most
        searches of a busy cohort end here: a head whose queue already borrows
        up to its limit, asked again at every change in the tree."""
        for fr, amount in usage.items():
            limit = node.borrowing_limit(fr)
            if not amount or limit is None:
                continue
            freed = sum(self.usage_of[c.workload.key].get(fr, 0) for c in same)
            if amount > node.subtree.get(fr, 0) + limit - node.used(fr) + freed:
                return True
        return False

    def _could_fit(
        self,
        node: Node,
        usage: dict[FlavorResource, int],
        contested: set[FlavorResource],
        candidates: list[Candidate],
        allow_borrowing: bool,
    ) -> bool:
        """Whether the preemptor could fit, in the walk that may or may not
        leave it borrowing, with as much gone as that walk could take; False:
        the walk fails, and need not be tried. A StrictFIFO gang that would
        borrow where its queue may not preempt while borrowing, searched again
        at every change in its cohort, is most searches of a busy replay.

        Of another queue's candidates, the borrowing walk takes none that
        only reclaim without borrowing. The walk takes one only while its
        queue is above its nominal quota of a contested resource. With one
        contested resource, the last one taken leaves the queue above nominal
        just before, so the walk takes less than the queue's excess plus its
        largest candidate there; and never more than all its candidates hold.
        Usage that much lower frees at least what the walk frees (available
        quota only grows as usage falls, and the preemptor's own queue borrows
        less), so a preemptor that does not fit then fits at no step of it."""
        taken: dict[str, dict[FlavorResource, int]] = {}
        largest: dict[str, int] = {}
        queues: dict[str, Node] = {}
        single = next(iter(contested)) if len(contested) == 1 else None
        for candidate in candidates:
            if allow_borrowing and candidate.variant is Variant.RECLAIM_WITHOUT_BORROWING:
                continue  # never a candidate of its own queue
            name = candidate.queue.name
            queues[name] = candidate.queue
            held = self.usage_of[candidate.workload.key]
            freed = taken.setdefault(name, {})
            for fr in usage:
                amount = held.get(fr, 0)
                if amount:
                    freed[fr] = freed.get(fr, 0) + amount
            if single is not None and candidate.queue is not node:
                largest[name] = max(largest.get(name, 0), held.get(single, 0))
        if single is not None:
            for name, most in largest.items():
                other, freed = queues[name], taken[name]
                excess = other.used(single) - other.subtree.get(single, 0)
                freed[single] = max(0, min(freed.get(single, 0), excess + most - 1))
        for name, freed in taken.items():
            self.tree.remove(name, freed)
        try:
            return self._fits(node, usage, allow_borrowing)
        finally:
            for name, freed in taken.items():
                self.tree.add(name, freed)

    def _advantaged_below_some_level(self, node: Node, usage: dict[FlavorResource, int]) -> bool:
        """Whether the request fits the quota of the queue or of a cohort below
        some level the search gathers candidates at: only then may a candidate
        of another queue reclaim hierarchically (see the ancestor walk in
        ``_classic``); otherwise, with borrowWithinCohort Never, each of them
        reclaims without borrowing, and no walk that leaves the preemptor
        borrowing may take it."""
        advantaged, remaining = self._fit_in_quota(node, usage)
        for ancestor in node.ancestors():
            if advantaged:
                return True
            advantaged, remaining = self._fit_in_quota(ancestor, remaining)
        return False

    def _borrows_still(
        self, node: Node, usage: dict[FlavorResource, int], same: list[Candidate]
    ) -> bool:
        """Whether the preemptor would borrow even with every candidate of its
        own queue gone: the only victims that lower its queue's usage, so no
        walk that may not leave it borrowing succeeds."""
        for fr, amount in usage.items():
            if not amount:
                continue
            freed = sum(self.usage_of[c.workload.key].get(fr, 0) for c in same)
            if node.borrowing_with(fr, amount - freed):
                return True
        return False

    def _borrowing_queues(
        self, ancestor: Node, skip: Node, contested: set[FlavorResource]
    ) -> Iterable[Node]:
        """Queues under ``ancestor`` (not under ``skip``) above nominal in a
        contested flavor-resource, descending only into cohorts that are too."""
        for child in ancestor.children:
            if child is skip:
                continue
            if child.is_cohort:
                if not child.within_nominal(contested):
                    yield from self._borrowing_queues(child, skip, contested)
            elif not child.within_nominal(contested):
                yield child

    @staticmethod
    def _fit_in_quota(
        node: Node, request: dict[FlavorResource, int]
    ) -> tuple[bool, dict[FlavorResource, int]]:
        fits = all(
            node.subtree.get(fr, 0) >= node.used(fr) + amount for fr, amount in request.items()
        )
        remaining = {
            fr: max(0, amount - node.local_available(fr)) for fr, amount in request.items()
        }
        return fits, remaining

    @staticmethod
    def _attempts(
        borrow: BorrowWithinCohort,
        has_hierarchy: bool,
        has_by_priority: bool,
        node: Node,
        contested: set[FlavorResource],
    ) -> list[bool]:
        forbidden = borrow is BorrowWithinCohort.NEVER
        no_other = not has_hierarchy and not has_by_priority
        under_nominal = all(node.used(fr) < node.nominal(fr) for fr in contested)
        if no_other or (forbidden and not under_nominal):
            return [True]
        if forbidden and not has_hierarchy:
            return [False, True]
        return [True, False]

    def _still_valid(
        self,
        candidate: Candidate,
        node: Node,
        allow_borrowing: bool,
        contested: set[FlavorResource],
    ) -> bool:
        if candidate.queue is node:
            return True
        if allow_borrowing and candidate.variant is Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        if candidate.queue.within_nominal(contested):
            return False
        for cohort in candidate.queue.ancestors():
            if cohort is candidate.lca:
                break
            if cohort.within_nominal(contested):
                return False
        return True

    def _greedy(
        self,
        ordered: list[Candidate],
        node: Node,
        usage: dict[FlavorResource, int],
        contested: set[FlavorResource],
        allow_borrowing: bool,
        steps: int | None = None,
    ) -> list[Candidate]:
        """The victims the walk takes (none: it does not succeed), looking
        at the first ``steps`` candidates only if given."""
        removed: list[Candidate] = []
        try:
            for candidate in ordered if steps is None else ordered[:steps]:
                if not self._still_valid(candidate, node, allow_borrowing, contested):
                    continue
                self._remove(candidate)
                removed.append(candidate)
                if self._fits(node, usage, allow_borrowing):
                    victims = self._fill_back(removed, node, usage, allow_borrowing)
                    removed = victims
                    return victims
            return []
        finally:
            for candidate in removed:
                self._restore(candidate)


def _targets(victims: list[Candidate]) -> list[Target]:
    """The victims a walk took, with the reason each is preempted for."""
    return [Target(c.workload, _VARIANT_REASON[c.variant]) for c in victims]
