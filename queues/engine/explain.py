"""Why a workload is pending, and the smallest change that would let it in.

An explanation re-runs flavor assignment against the current usage and reports,
per flavor × resource, what was asked, what is available and why (nominal
quota, what the cohort can lend, the borrowing limit); whether preemption was
considered and why it found no victims; the workload's place in its queue;
and suggestions: ask for less, use another flavor, wait for a named running
workload, or change a quota. A workload that fits now is only promised the next
cycle after that cycle has been rehearsed on a copy of the scheduler: an entry
the cycle considers first (another queue's head, say) may take the capacity,
and is then named. One behind its queue's head is promised only if the cycles
that follow, with nothing else changing, reach and admit it (a StrictFIFO head
that does not fit blocks it); ``queues.engine.rehearsal`` runs those rehearsals.
Every field is machine-readable; ``message`` is the same in plain English.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from queues.engine.assign import Assignment, Mode, QuotaCheck
from queues.engine.messages import kubernetes_quantity
from queues.engine.model import FlavorResource, Workload
from queues.engine.rehearsal import (
    behind_sentence,
    fits_sentence,
    rehearse_next_cycle,
    rehearse_until_stable,
)
from queues.engine.scheduler import Scheduler
from queues.engine.victim_search import holds_any


@dataclass
class Shortfall:
    flavor: str
    resource: str
    requested: str
    available: str
    short_by: str
    nominal: str
    borrowing_limit: str | None
    queue_usage: str
    cohort_available: str | None
    never_fits: bool
    maximum: str


@dataclass
class Suggestion:
    kind: str  # fewer-resources | other-flavor | wait-for | raise-quota | raise-borrowing-limit
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Explanation:
    workload: str
    cluster_queue: str
    status: str  # admitted | quota-reserved | pending | inactive
    reason: str
    message: str
    position: int | None
    ahead: int | None
    shortfalls: list[Shortfall] = field(default_factory=list)
    skipped_flavors: dict[str, str] = field(default_factory=dict)
    # Why its pods find no place together on a topology-aware flavor (Kueue's words).
    placement: list[str] = field(default_factory=list)
    preemption: dict[str, Any] = field(default_factory=dict)
    suggestions: list[Suggestion] = field(default_factory=list)
    # For a workload that fits now: what the rehearsed next cycle does with it
    # (``outcome``: admitted | quota-reserved | pending | not-considered), and
    # ``taken_by``: the entries processed before it that took capacity it needs.
    next_cycle: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _q(resource: str, amount: int) -> str:
    return kubernetes_quantity(resource, amount)


def explain(scheduler: Scheduler, key: str) -> Explanation:
    workload = scheduler.workloads[key]
    queue_name = workload.cluster_queue
    if workload.admission is not None:
        status = "admitted" if workload.is_admitted else "quota-reserved"
        waiting = sorted(c for c, s in workload.check_states.items() if s.value != "Ready")
        message = (
            "Admitted."
            if status == "admitted"
            else f"Quota reserved; waiting for admission check(s) {', '.join(waiting)}."
        )
        return Explanation(key, queue_name, status, status, message, None, None)
    pending_queue = scheduler.queues[queue_name]
    position = pending_queue.position(key)
    last = scheduler.status.get(key)
    if not workload.active:
        return Explanation(
            key,
            queue_name,
            "inactive",
            last.reason if last else "Deactivated",
            last.message if last else "The workload is deactivated.",
            None,
            None,
        )
    queue = scheduler.policy.cluster_queues[queue_name]
    if queue.stop_policy.value != "None":
        return Explanation(
            key,
            queue_name,
            "pending",
            "Suspended",
            f"ClusterQueue {queue_name} is stopped ({queue.stop_policy.value}); "
            "nothing is admitted until its stopPolicy is None.",
            position,
            (position - 1) if position else None,
        )
    assignment = scheduler.assign(workload)
    explanation = Explanation(
        key,
        queue_name,
        "pending",
        last.reason if last else "Queued",
        assignment.message() or (last.message if last else ""),
        position,
        (position - 1) if position else None,
    )
    for pod_set in assignment.pod_sets:
        explanation.skipped_flavors.update(pod_set.skipped_flavors)
        explanation.placement.extend(r for r in pod_set.reasons if r.startswith("topology "))
    explanation.shortfalls = _shortfalls(scheduler, workload, assignment)
    if assignment.fits:
        explanation.reason = (
            "Fits" if explanation.reason in ("Queued", "Fits") else explanation.reason
        )
        if position and position > 1:
            explanation.next_cycle = rehearse_until_stable(scheduler, key)
            explanation.message = behind_sentence(explanation.next_cycle, position, queue_name)
        else:
            explanation.next_cycle = rehearse_next_cycle(scheduler, key, assignment.usage)
            explanation.message = fits_sentence(explanation.next_cycle)
    else:
        explanation.preemption = _preemption(scheduler, workload, assignment)
        explanation.suggestions = _suggestions(scheduler, workload, assignment)
        explanation.message = _sentence(explanation)
    return explanation


def _shortfalls(
    scheduler: Scheduler, workload: Workload, assignment: Assignment
) -> list[Shortfall]:
    node = scheduler.tree.queues[workload.cluster_queue]
    result: list[Shortfall] = []
    seen: set[FlavorResource] = set()
    for pod_set in assignment.pod_sets:
        for check in pod_set.checks:
            fr = (check.flavor, check.resource)
            if check.mode is Mode.FIT or fr in seen:
                continue
            seen.add(fr)
            result.append(_shortfall(scheduler, node.name, check))
    return result


def _shortfall(scheduler: Scheduler, queue: str, check: QuotaCheck) -> Shortfall:
    node = scheduler.tree.queues[queue]
    fr = (check.flavor, check.resource)
    resource = check.resource
    cohort_available = node.parent.available(fr) if node.parent is not None else None
    return Shortfall(
        flavor=check.flavor,
        resource=resource,
        requested=_q(resource, check.requested),
        available=_q(resource, check.available),
        short_by=_q(resource, max(0, check.requested - check.available)),
        nominal=_q(resource, check.nominal),
        borrowing_limit=(
            _q(resource, check.borrowing_limit) if check.borrowing_limit is not None else None
        ),
        queue_usage=_q(resource, node.used(fr)),
        cohort_available=(
            _q(resource, max(0, cohort_available)) if cohort_available is not None else None
        ),
        never_fits=check.requested > check.potential,
        maximum=_q(resource, check.potential),
    )


def _preemption(scheduler: Scheduler, workload: Workload, assignment: Assignment) -> dict[str, Any]:
    """Whether preemption could help, and if not, what protects each workload."""
    queue = scheduler.policy.cluster_queues[workload.cluster_queue]
    policy = queue.preemption
    contested: set[FlavorResource] = {
        (c.flavor, c.resource)
        for p in assignment.pod_sets
        for c in p.checks
        if c.mode is not Mode.FIT and c.requested <= c.potential
    }
    summary: dict[str, Any] = {
        "considered": bool(contested),
        "within_cluster_queue": policy.within_cluster_queue.value,
        "reclaim_within_cohort": policy.reclaim_within_cohort.value,
        "borrow_within_cohort": policy.borrow_within_cohort.value,
        "protected": [],
    }
    if not contested:
        return summary
    preemptor = scheduler.preemptor_for(exclude=set())
    node = scheduler.tree.queues[queue.name]
    protected: list[dict[str, str]] = []
    for other_name, holders in sorted(scheduler.reserved.items()):
        other = scheduler.tree.queues[other_name]
        if other_name != queue.name and (node.parent is None or other.root() is not node.root()):
            continue
        for key, holder in sorted(holders.items()):
            if not holds_any(scheduler.usage_of.get(key, {}), contested):
                continue
            why = preemptor.protection(workload, queue, holder, contested)
            if why:
                protected.append({"workload": key, "cluster_queue": other_name, "why": why})
    summary["protected"] = protected
    return summary


def _suggestions(
    scheduler: Scheduler, workload: Workload, assignment: Assignment
) -> list[Suggestion]:
    suggestions: list[Suggestion] = []
    node = scheduler.tree.queues[workload.cluster_queue]
    queue = scheduler.policy.cluster_queues[workload.cluster_queue]
    failing = [p for p in assignment.pod_sets if p.mode is not Mode.FIT]
    checks = [c for p in failing for c in p.checks if c.mode is not Mode.FIT]
    # 1. Ask for less: the most of each short resource that fits now.
    for check in checks:
        if check.available > 0:
            suggestions.append(
                Suggestion(
                    "fewer-resources",
                    f"request at most {_q(check.resource, check.available)} {check.resource} in "
                    f"flavor {check.flavor} (now {_q(check.resource, check.requested)})",
                    {
                        "flavor": check.flavor,
                        "resource": check.resource,
                        "fits_now": _q(check.resource, check.available),
                    },
                )
            )
    # 2. Another flavor, blocked only by taints or node selectors.
    for pod_set in failing:
        for flavor, why in pod_set.skipped_flavors.items():
            suggestions.append(
                Suggestion(
                    "other-flavor",
                    f"flavor {flavor} is skipped: {why}; tolerate or select it to use its quota",
                    {"flavor": flavor, "why": why},
                )
            )
    # 3. Capacity freed by one named running workload.
    blocker = _single_blocker(scheduler, workload, assignment)
    if blocker is not None:
        suggestions.append(
            Suggestion(
                "wait-for",
                f"it fits once {blocker} finishes or is preempted",
                {"workload": blocker},
            )
        )
    # 4. Quota changes for what can never fit or is capped by a limit.
    for check in checks:
        fr = (check.flavor, check.resource)
        missing = check.requested - check.available
        if missing <= 0:
            continue
        limit = node.borrowing_limit(fr)
        if limit is not None and node.parent is not None and check.requested > check.potential:
            extra = _q(check.resource, check.requested - check.potential)
            suggestions.append(
                Suggestion(
                    "raise-borrowing-limit",
                    f"raise borrowingLimit of {check.resource} in flavor {check.flavor} of cluster "
                    f"queue {queue.name} by {extra}",
                    {
                        "cluster_queue": queue.name,
                        "flavor": check.flavor,
                        "resource": check.resource,
                        "by": extra,
                    },
                )
            )
        suggestions.append(
            Suggestion(
                "raise-quota",
                f"raise nominalQuota of {check.resource} in flavor {check.flavor} of cluster queue "
                f"{queue.name} by {_q(check.resource, missing)}",
                {
                    "cluster_queue": queue.name,
                    "flavor": check.flavor,
                    "resource": check.resource,
                    "by": _q(check.resource, missing),
                },
            )
        )
    return suggestions


def _single_blocker(scheduler: Scheduler, workload: Workload, assignment: Assignment) -> str | None:
    """The smallest running workload in the same tree whose departure alone would
    make this one fit, by usage of the short resources."""
    needed: dict[FlavorResource, int] = {}
    for pod_set in assignment.pod_sets:
        for check in pod_set.checks:
            if check.mode is not Mode.FIT and check.requested <= check.potential:
                fr = (check.flavor, check.resource)
                needed[fr] = max(needed.get(fr, 0), check.requested)
    if not needed:
        return None
    node = scheduler.tree.queues[workload.cluster_queue]
    candidates = []
    for queue_node in node.root().queues():
        for key in scheduler.reserved.get(queue_node.name, {}):
            usage = scheduler.usage_of.get(key, {})
            size = sum(usage.get(fr, 0) for fr in needed)
            if size:
                candidates.append((size, key, queue_node.name, usage))
    for _, key, queue_name, usage in sorted(candidates):
        scheduler.tree.remove(queue_name, usage)
        try:
            if scheduler.tree.fits(workload.cluster_queue, needed):
                return key
        finally:
            scheduler.tree.add(queue_name, usage)
    return None


def _sentence(explanation: Explanation) -> str:
    parts = []
    for short in explanation.shortfalls:
        if short.never_fits:
            parts.append(
                f"it asks for {short.requested} {short.resource} in flavor {short.flavor} but "
                f"the queue can never have more than {short.maximum} there, even by borrowing"
            )
        else:
            where = (
                f", and the cohort has {short.cohort_available} to lend"
                if short.cohort_available is not None
                else ""
            )
            parts.append(
                f"it needs {short.requested} {short.resource} in flavor {short.flavor}; "
                f"{short.available} is free to it ({short.queue_usage} used of nominal "
                f"{short.nominal}{where}), {short.short_by} short"
            )
    for flavor, why in explanation.skipped_flavors.items():
        parts.append(f"flavor {flavor} is not usable: {why}")
    for why in explanation.placement:
        room = "" if explanation.shortfalls else "the quota has room, but "
        parts.append(f"{room}its pods find no place together: {why}")
    if explanation.preemption.get("considered") and explanation.reason != (
        "WaitingForPreemptedWorkloads"
    ):
        protected = explanation.preemption.get("protected", [])
        if protected:
            parts.append(
                f"preemption found no victims: {len(protected)} running workload(s) "
                f"are protected (e.g. {protected[0]['workload']}: "
                f"{protected[0]['why']})"
            )
    where = f" It is number {explanation.position} in its queue." if explanation.position else ""
    text = "; ".join(parts) if parts else explanation.message
    return f"Pending: {text}.{where}"
