"""Fair-sharing preemption, as Kueue v0.19 does it: victims come from the
queues with the highest dominant resource share, walking down the cohort tree,
as long as the preemptor's share stays at or below theirs by the configured
strategies. ``Preemptor`` (``queues.engine.preemption``) adds the classic
search and chooses between the two.

The tree is changed while simulating and always restored before returning.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from mypy_extensions import mypyc_attr

from queues.engine.fairshare import Share, compare, dominant_resource_share
from queues.engine.model import (
    ClusterQueue,
    FlavorResource,
    ReclaimWithinCohort,
    WithinClusterQueue,
    Workload,
)
from queues.engine.quota import Node
from queues.engine.victim_search import Candidate, Reason, Target, Variant, VictimSearch


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class FairSharingSearch(VictimSearch):
    """Victims by dominant resource share (``_fair``)."""

    def _fair(
        self,
        preemptor: Workload,
        queue: ClusterQueue,
        contested: set[FlavorResource],
        usage: dict[FlavorResource, int],
    ) -> list[Target]:
        node = self.tree.queues[queue.name]
        policy = queue.preemption
        candidates: list[Candidate] = []
        if policy.within_cluster_queue is not WithinClusterQueue.NEVER:
            for workload in self._using(queue.name, preemptor, contested):
                if self._satisfies(policy.within_cluster_queue.value, preemptor, workload):
                    candidates.append(Candidate(workload, node, Variant.WITHIN_QUEUE))
        if (
            node.parent is not None
            and policy.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
        ):
            for other in node.root().queues():
                if other is node or not any(other.used(fr) > other.nominal(fr) for fr in contested):
                    continue
                for workload in self._using(other.name, preemptor, contested):
                    if self._satisfies(policy.reclaim_within_cohort.value, preemptor, workload):
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
            within_nominal = all(node.used(fr) <= node.nominal(fr) for fr in contested)
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

    def _fits_fair(self, node: Node, usage: dict[FlavorResource, int]) -> bool:
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
        usage: dict[FlavorResource, int],
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
        usage: dict[FlavorResource, int],
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
