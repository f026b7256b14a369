"""Choosing preemption victims, as Kueue v0.19 does.

Classic preemption collects candidates in the preemptor's queue
(``withinClusterQueue``) and, walking up the cohort tree, in queues using more
than their nominal quota in the contested flavor-resources
(``reclaimWithinCohort``, ``borrowWithinCohort`` with its priority threshold);
orders them (other queues first, lower priority first, most recently admitted
first); removes them one by one until the preemptor fits; then gives back every
victim that turned out not to be needed. Fair-sharing preemption instead picks
victims from the queues with the highest dominant resource share, as long as the
preemptor's share stays at or below theirs.

The tree is changed while simulating and always restored before returning.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum

from queues.engine.fairshare import Share, compare, dominant_resource_share
from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    FlavorResource,
    Policy,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
    Workload,
)
from queues.engine.quota import Node, QuotaTree


class Reason(StrEnum):
    """Kueue's Preempted condition reasons."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


REASON_TEXT = {
    Reason.IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    Reason.IN_COHORT_RECLAMATION: "reclamation within the cohort",
    Reason.IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    Reason.IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


def _not_lower(rule: str, preemptor: Workload, holder: Workload) -> str:
    said = f"priority {holder.priority} is not lower than {preemptor.priority}"
    if rule == "LowerOrNewerEqualPriority" and holder.priority == preemptor.priority:
        return f"{said} and it is not newer"
    return said


class Variant(Enum):
    WITHIN_QUEUE = "within-queue"
    HIERARCHICAL_RECLAIM = "hierarchical-reclaim"
    RECLAIM_WITHOUT_BORROWING = "reclaim-without-borrowing"
    RECLAIM_WHILE_BORROWING = "reclaim-while-borrowing"


_VARIANT_REASON = {
    Variant.WITHIN_QUEUE: Reason.IN_CLUSTER_QUEUE,
    Variant.HIERARCHICAL_RECLAIM: Reason.IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WITHOUT_BORROWING: Reason.IN_COHORT_RECLAMATION,
    Variant.RECLAIM_WHILE_BORROWING: Reason.IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True)
class Target:
    workload: Workload
    reason: Reason


@dataclass(slots=True)
class Candidate:
    workload: Workload
    queue: Node
    variant: Variant
    lca: Node | None = None


class Preemptor:
    """Finds victims against the scheduler's current usage.

    ``reserved`` maps each ClusterQueue to the workloads holding quota there;
    ``exclude`` are workloads that may not be preempted (admitted earlier in this
    cycle); ``usage_of`` gives a workload's held usage; ``now`` stands in for the
    admission time of workloads that have none."""

    def __init__(
        self,
        policy: Policy,
        tree: QuotaTree,
        reserved: Mapping[str, Mapping[str, Workload]],
        usage_of: Mapping[str, Mapping[FlavorResource, int]],
        exclude: set[str],
        now: float,
    ) -> None:
        self.policy = policy
        self.tree = tree
        self.reserved = reserved
        self.usage_of = usage_of
        self.exclude = exclude
        self.now = now

    # ---------------------------------------------------------------- shared

    def _uses(self, workload: Workload, contested: set[FlavorResource]) -> bool:
        return not contested.isdisjoint(self.usage_of[workload.key])

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

    def _remove(self, candidate: Candidate) -> None:
        self.tree.remove(candidate.queue.name, self.usage_of[candidate.workload.key])

    def _restore(self, candidate: Candidate) -> None:
        self.tree.add(candidate.queue.name, self.usage_of[candidate.workload.key])

    def _fits(
        self, queue: Node, usage: Mapping[FlavorResource, int], allow_borrowing: bool
    ) -> bool:
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
        usage: Mapping[FlavorResource, int],
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
        usage: Mapping[FlavorResource, int],
    ) -> list[Target]:
        if not contested:
            return []
        if self.policy.fair_sharing:
            return self._fair(preemptor, queue, contested, usage)
        return self._classic(preemptor, queue, contested, usage)

    # --------------------------------------------------------------- classic

    def _classic(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        contested: set[FlavorResource],
        usage: Mapping[FlavorResource, int],
    ) -> list[Target]:
        node = self.tree.queues[queue.name]
        policy = queue.preemption
        within_queue = policy.within_cluster_queue.value
        reclaim = policy.reclaim_within_cohort.value
        same: list[Candidate] = []
        if policy.within_cluster_queue is not WithinClusterQueue.NEVER:
            for workload in self._reserved(queue.name, preemptor):
                if self._uses(workload, contested) and self._satisfies(
                    within_queue, preemptor, workload
                ):
                    same.append(Candidate(workload, node, Variant.WITHIN_QUEUE))
        hierarchy: list[Candidate] = []
        by_priority: list[Candidate] = []
        if (
            node.parent is not None
            and policy.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
        ):
            advantaged, remaining = self._fit_in_quota(node, usage)
            previous: Node = node
            for ancestor in node.ancestors():
                for other in self._borrowing_queues(ancestor, skip=previous, contested=contested):
                    if other is node:
                        continue
                    for workload in self._reserved(other.name, preemptor):
                        if not self._uses(workload, contested) or not self._satisfies(
                            reclaim, preemptor, workload
                        ):
                            continue
                        variant = self._variant(advantaged, preemptor, workload, queue)
                        candidate = Candidate(workload, other, variant, ancestor)
                        (hierarchy if advantaged else by_priority).append(candidate)
                fits, remaining = self._fit_in_quota(ancestor, remaining)
                advantaged = advantaged or fits
                previous = ancestor
        ordered = self._ordered([hierarchy, by_priority, same], queue.name)
        for allow_borrowing in self._attempts(
            policy.borrow_within_cohort, hierarchy, by_priority, node, contested
        ):
            found = self._greedy(ordered, node, usage, contested, allow_borrowing)
            if found:
                return [Target(c.workload, _VARIANT_REASON[c.variant]) for c in found]
        return []

    def _reserved(self, queue: str, preemptor: Workload) -> Iterable[Workload]:
        """Workloads holding quota in ``queue`` that could be victims. A stopped
        queue is not in Kueue's snapshot: its usage counts, its workloads are
        never candidates."""
        if self.policy.cluster_queues[queue].stop_policy is not StopPolicy.NONE:
            return
        for key, workload in self.reserved.get(queue, {}).items():
            if key != preemptor.key and key not in self.exclude:
                yield workload

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
        node: Node, request: Mapping[FlavorResource, int]
    ) -> tuple[bool, dict[FlavorResource, int]]:
        fits = all(
            node.subtree.get(fr, 0) >= node.usage.get(fr, 0) + amount
            for fr, amount in request.items()
        )
        remaining = {
            fr: max(0, amount - node.local_available(fr)) for fr, amount in request.items()
        }
        return fits, remaining

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

    def _ordered(self, lists: list[list[Candidate]], queue: str) -> list[Candidate]:
        evicting: list[Candidate] = []
        rest: list[Candidate] = []
        for candidates in lists:
            candidates.sort(key=lambda c: self._order_key(c, queue))
            evicting.extend(c for c in candidates if c.workload.evicting)
            rest.extend(c for c in candidates if not c.workload.evicting)
        return evicting + rest

    @staticmethod
    def _attempts(
        borrow: BorrowWithinCohort,
        hierarchy: list[Candidate],
        by_priority: list[Candidate],
        node: Node,
        contested: set[FlavorResource],
    ) -> list[bool]:
        forbidden = borrow is BorrowWithinCohort.NEVER
        no_other = not hierarchy and not by_priority
        under_nominal = all(node.usage.get(fr, 0) < node.nominal(fr) for fr in contested)
        if no_other or (forbidden and not under_nominal):
            return [True]
        if forbidden and not hierarchy:
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
        usage: Mapping[FlavorResource, int],
        contested: set[FlavorResource],
        allow_borrowing: bool,
    ) -> list[Candidate]:
        removed: list[Candidate] = []
        try:
            for candidate in ordered:
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

    # ---------------------------------------------------------- fair sharing

    def _fair(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        contested: set[FlavorResource],
        usage: Mapping[FlavorResource, int],
    ) -> list[Target]:
        node = self.tree.queues[queue.name]
        policy = queue.preemption
        candidates: list[Candidate] = []
        if policy.within_cluster_queue is not WithinClusterQueue.NEVER:
            for workload in self._reserved(queue.name, preemptor):
                if self._uses(workload, contested) and self._satisfies(
                    policy.within_cluster_queue.value, preemptor, workload
                ):
                    candidates.append(Candidate(workload, node, Variant.WITHIN_QUEUE))
        if (
            node.parent is not None
            and policy.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
        ):
            for other in node.root().queues():
                if other is node or not any(
                    other.usage.get(fr, 0) > other.nominal(fr) for fr in contested
                ):
                    continue
                for workload in self._reserved(other.name, preemptor):
                    if self._uses(workload, contested) and self._satisfies(
                        policy.reclaim_within_cohort.value, preemptor, workload
                    ):
                        candidates.append(
                            Candidate(workload, other, Variant.RECLAIM_WITHOUT_BORROWING)
                        )
        if not candidates:
            return []
        candidates.sort(key=lambda c: self._order_key(c, queue.name))
        per_queue: dict[str, list[Candidate]] = {}
        for candidate in candidates:
            per_queue.setdefault(candidate.queue.name, []).append(candidate)
        self.tree.add(queue.name, usage)
        removed: list[tuple[Candidate, Reason]] = []
        fitted = False
        try:
            within_nominal = all(node.usage.get(fr, 0) <= node.nominal(fr) for fr in contested)
            strategies = self.policy.fair_sharing_strategies
            fitted, retry = self._fair_first_pass(
                node, per_queue, usage, removed, within_nominal, strategies[0]
            )
            if not fitted and retry and len(strategies) > 1:
                fitted = self._fair_second_pass(node, retry, usage, removed)
        finally:
            self.tree.remove(queue.name, usage)
        if not fitted:
            for candidate, _ in removed:
                self._restore(candidate)
            return []
        victims = self._fill_back([c for c, _ in removed], node, usage, allow_borrowing=True)
        reasons = {id(c): reason for c, reason in removed}
        for candidate in victims:
            self._restore(candidate)
        return [Target(c.workload, reasons[id(c)]) for c in victims]

    def _fits_fair(self, node: Node, usage: Mapping[FlavorResource, int]) -> bool:
        """Fair sharing keeps the preemptor's usage in the tree while searching."""
        self.tree.remove(node.name, usage)
        try:
            return self._fits(node, usage, allow_borrowing=True)
        finally:
            self.tree.add(node.name, usage)

    def _fair_first_pass(
        self,
        node: Node,
        per_queue: dict[str, list[Candidate]],
        usage: Mapping[FlavorResource, int],
        removed: list[tuple[Candidate, Reason]],
        within_nominal: bool,
        strategy: str,
    ) -> tuple[bool, dict[str, list[Candidate]]]:
        """Take victims while the strategy allows: LessThanOrEqualToFinalShare
        compares the preemptor's new share with the target's share after the
        removal; LessThanInitialShare with the target's share before it."""
        retry: dict[str, list[Candidate]] = {}
        for target in self._target_queues(node, per_queue):
            pending = per_queue[target.name]
            if target is node or within_nominal:
                candidate = pending.pop(0)
                self._remove(candidate)
                reason = Reason.IN_CLUSTER_QUEUE if target is node else Reason.IN_COHORT_RECLAMATION
                removed.append((candidate, reason))
                if self._fits_fair(node, usage):
                    return True, retry
                continue
            preemptor_share, target_old = self._shares(node, target)
            if math.isinf(preemptor_share.weighted) and not math.isinf(target_old.weighted):
                retry.setdefault(target.name, []).extend(pending)
                pending.clear()
                continue
            while pending:
                candidate = pending.pop(0)
                self._remove(candidate)
                _, target_new = self._shares(node, target)
                allowed = (
                    compare(preemptor_share, target_new) <= 0
                    if strategy == "LessThanOrEqualToFinalShare"
                    else compare(preemptor_share, target_old) < 0
                )
                if allowed:
                    removed.append((candidate, Reason.IN_COHORT_FAIR_SHARING))
                    if self._fits_fair(node, usage):
                        return True, retry
                    break
                self._restore(candidate)
                retry.setdefault(target.name, []).append(candidate)
        return False, retry

    def _fair_second_pass(
        self,
        node: Node,
        retry: dict[str, list[Candidate]],
        usage: Mapping[FlavorResource, int],
        removed: list[tuple[Candidate, Reason]],
    ) -> bool:
        for target in self._target_queues(node, retry):
            candidate = retry[target.name][0]
            retry[target.name] = []
            preemptor_share, target_old = self._shares(node, target)
            if compare(preemptor_share, target_old) < 0:
                self._remove(candidate)
                removed.append((candidate, Reason.IN_COHORT_FAIR_SHARING))
                if self._fits_fair(node, usage):
                    return True
        return False

    def _shares(self, preemptor: Node, target: Node) -> tuple[Share, Share]:
        """DRS of the nodes directly under the two queues' lowest common ancestor."""
        preemptor_path = [preemptor, *preemptor.ancestors()]
        ancestors = set(map(id, preemptor_path))
        below_lca_target = target
        for ancestor in target.ancestors():
            if id(ancestor) in ancestors:
                lca = ancestor
                break
            below_lca_target = ancestor
        else:
            return dominant_resource_share(preemptor), dominant_resource_share(target)
        below_lca_preemptor = preemptor
        for ancestor in preemptor.ancestors():
            if ancestor is lca:
                break
            below_lca_preemptor = ancestor
        return dominant_resource_share(below_lca_preemptor), dominant_resource_share(
            below_lca_target
        )

    def _target_queues(self, node: Node, per_queue: dict[str, list[Candidate]]) -> Iterable[Node]:
        """Queues to take victims from, highest share first, walking down from the
        root; re-evaluated after every victim, since shares change. A queue drops
        out once its candidate list is empty."""
        if node.parent is None:
            while per_queue.get(node.name):
                yield node
            return
        pruned: set[int] = set()
        root = node.root()
        while id(root) not in pruned:
            target = self._next_target(root, node, per_queue, pruned)
            if target is not None:
                yield target

    def _next_target(
        self, cohort: Node, preemptor: Node, per_queue: dict[str, list[Candidate]], pruned: set[int]
    ) -> Node | None:
        best_queue: Node | None = None
        best_queue_share: Share | None = None
        best_cohort: Node | None = None
        best_cohort_share: Share | None = None
        preemptor_ancestors = {id(a) for a in preemptor.ancestors()}
        for child in cohort.children:
            if id(child) in pruned:
                continue
            share = dominant_resource_share(child)
            if child.is_cohort:
                if not share.borrowing and id(child) not in preemptor_ancestors:
                    pruned.add(id(child))
                    continue
                if best_cohort_share is None or compare(share, best_cohort_share) >= 0:
                    best_cohort, best_cohort_share = child, share
            else:
                if (not share.borrowing and child is not preemptor) or not per_queue.get(
                    child.name
                ):
                    pruned.add(id(child))
                    continue
                if (
                    best_queue_share is None
                    or compare(share, best_queue_share) > 0
                    or (
                        compare(share, best_queue_share) == 0
                        and best_queue is not None
                        and self._order_key(per_queue[child.name][0], preemptor.name)
                        < self._order_key(per_queue[best_queue.name][0], preemptor.name)
                    )
                ):
                    best_queue, best_queue_share = child, share
        if best_cohort is None and best_queue is None:
            pruned.add(id(cohort))
            return None
        if best_cohort is not None and (
            best_queue_share is None
            or best_cohort_share is None
            or compare(best_cohort_share, best_queue_share) >= 0
        ):
            return self._next_target(best_cohort, preemptor, per_queue, pruned)
        return best_queue
