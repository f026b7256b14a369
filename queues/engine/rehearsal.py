"""What the next scheduling cycles do with a workload that fits now, and the
sentences that say so.

An explanation (``queues.engine.explain``) promises a workload that fits
nothing until it has rehearsed those cycles on a deep copy of the scheduler:
an entry the next cycle considers first may take the capacity, and a workload
behind its queue's head may never be reached. The explanation reads the
current state; these run cycles, so they have a module of their own.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from queues.engine.model import FlavorResource
from queues.engine.outcomes import CycleResult, Entry
from queues.engine.runner import run_cycles
from queues.engine.scheduler import Scheduler


def rehearse_next_cycle(
    scheduler: Scheduler, key: str, usage: dict[FlavorResource, int]
) -> dict[str, Any]:
    """Run the next scheduling cycle on a deep copy (parked workloads queued
    again first, as Kueue does a moment after capacity changes) and report what
    it does with ``key``; when it leaves it pending, name every entry processed
    before it that reduced what is free to it in a flavor-resource it needs."""
    trial = copy.deepcopy(scheduler)
    trial.apply_unpark_requests()
    queue = trial.workloads[key].cluster_queue
    node = trial.tree.queues[queue]
    needed = [fr for fr, amount in sorted(usage.items()) if amount]
    takers: list[tuple[str, str, list[FlavorResource]]] = []
    reached = False

    def watched(entry: Entry, process: Callable[[], None]) -> None:
        nonlocal reached
        if entry.workload.key == key or reached:
            reached = True
            process()
            return
        before = {fr: node.available(fr) for fr in needed}
        process()
        taken = [fr for fr in needed if node.available(fr) < before[fr]]
        if taken:
            takers.append((entry.workload.key, entry.queue.name, taken))

    # The copy is thrown away: watching its entries cannot change the real cycle.
    trial.process_watch = watched
    result = trial.cycle()
    settled = _settled(trial, result, key)
    if settled is not None:
        return settled
    return _still_pending(
        result,
        key,
        [
            {
                "workload": taker,
                "cluster_queue": taker_queue,
                "outcome": _outcome(result, taker),
                "flavor_resources": [{"flavor": f, "resource": r} for f, r in taken],
            }
            for taker, taker_queue, taken in takers
        ],
    )


def _settled(trial: Scheduler, result: CycleResult, key: str) -> dict[str, Any] | None:
    """The outcome when the rehearsal admitted ``key``, reserved its quota or
    never considered it; None when it left it pending."""
    if key in result.admitted:
        return {"outcome": "admitted", "reason": "Admitted", "taken_by": []}
    if key in result.reserved:
        return {
            "outcome": "quota-reserved",
            "reason": "QuotaReserved",
            "admission_checks": sorted(trial.workloads[key].check_states),
            "taken_by": [],
        }
    if key not in result.evaluated:
        return {"outcome": "not-considered", "reason": None, "taken_by": []}
    return None


def _still_pending(result: CycleResult, key: str, taken_by: list[dict[str, Any]]) -> dict[str, Any]:
    pending = result.evaluated[key]
    return {
        "outcome": "pending",
        "reason": pending.reason,
        "message": pending.message,
        "taken_by": taken_by,
    }


def rehearse_until_stable(scheduler: Scheduler, key: str) -> dict[str, Any]:
    """For a workload behind its queue's head: whether the cycles Kueue runs
    next, while nothing else changes, reach and admit it (a StrictFIFO head
    that does not fit never lets it pass; a BestEffortFIFO one does, and those
    ahead may take the room first). Run on a deep copy, until stable."""
    trial = copy.deepcopy(scheduler)
    trial.apply_unpark_requests()
    result = run_cycles(trial, until_stable=True)
    settled = _settled(trial, result, key)
    if settled is not None:
        return settled
    return _still_pending(result, key, [])


def behind_sentence(next_cycle: dict[str, Any], position: int, queue: str) -> str:
    where = f"it is number {position} in ClusterQueue {queue}"
    outcome = next_cycle["outcome"]
    if outcome == "admitted":
        return f"Fits now; {where} and the scheduling cycles ahead reach and admit it."
    if outcome == "quota-reserved":
        checks = ", ".join(next_cycle["admission_checks"])
        return (
            f"Fits now; {where}; the scheduling cycles ahead reserve its quota, then it "
            f"waits for admission check(s) {checks}."
        )
    if outcome == "not-considered":
        return (
            f"Its quota is free, but {where} and the workloads ahead of it do not move "
            "until capacity changes, so no scheduling cycle reaches it yet."
        )
    return (
        f"Its quota is free, but {where} and those ahead of it are admitted first; then it "
        f"stays pending ({next_cycle['reason']}: {next_cycle['message']})."
    )


def _outcome(result: CycleResult, key: str) -> str:
    if key in result.admitted:
        return "admitted"
    if key in result.reserved:
        return "quota-reserved"
    pending = result.evaluated.get(key)
    if pending is not None and pending.reason == "WaitingForPreemptedWorkloads":
        return "preempting"  # it holds the capacity while its victims stop
    return "holding"  # a head waiting for preemption holds capacity for the cycle


def fits_sentence(next_cycle: dict[str, Any]) -> str:
    outcome = next_cycle["outcome"]
    if outcome == "admitted":
        return "Fits now; it will be admitted in the next scheduling cycle."
    if outcome == "quota-reserved":
        checks = ", ".join(next_cycle["admission_checks"])
        return (
            "Fits now; quota will be reserved for it in the next scheduling cycle, then it "
            f"waits for admission check(s) {checks}."
        )
    if outcome == "not-considered":
        return (
            "Fits now, but the next scheduling cycle does not consider it: it waits as "
            "inadmissible until its queue is requeued after capacity in its cohort changes."
        )
    takers = next_cycle["taken_by"]
    if not takers:
        return (
            "Fits now, but the next scheduling cycle leaves it pending "
            f"({next_cycle['reason']}: {next_cycle['message']})."
        )
    named = []
    for taker in takers:
        where = ", ".join(
            f"{p['resource']} in flavor {p['flavor']}" for p in taker["flavor_resources"]
        )
        queue, outcome = taker["cluster_queue"], taker["outcome"]
        named.append(f"{taker['workload']} (ClusterQueue {queue}, {outcome}; {where})")
    verb = "takes" if len(named) == 1 else "take"
    return (
        f"Fits now, but the next scheduling cycle considers {', '.join(named)} first, which "
        f"{verb} the capacity it needs; it stays pending ({next_cycle['reason']})."
    )
