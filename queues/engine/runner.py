"""Running the engine on a scenario's state: one cycle, or cycles until nothing
changes, reported in the shape ``manage.py admission_cycle --json`` prints.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from typing import Any

from queues.engine.model import Workload
from queues.engine.outcomes import told_as_before
from queues.engine.scenario import Scenario
from queues.engine.scheduler import CycleResult, Scheduler


def display_name(workload: Workload) -> str:
    return workload.name if workload.namespace == "default" else workload.key


def scheduler_for(scenario: Scenario) -> Scheduler:
    """A scheduler holding the scenario's explicit workloads at time 0."""
    scheduler = Scheduler(scenario.policy, now=0.0)
    for workload in scenario.workloads:
        scheduler.add(workload)
    for workload in list(scheduler.workloads.values()):
        if workload.admission is not None and workload.check_states:
            scheduler.reconcile_checks(workload.key)
    return scheduler


def run_cycles(
    scheduler: Scheduler, *, until_stable: bool, max_cycles: int | None = None
) -> CycleResult:
    """One cycle, or repeat (letting parked workloads back in between cycles, as
    Kueue does a moment after capacity changes) until stable: a cycle admits and
    preempts nothing and evaluates no head it had not already evaluated, with the
    same outcome, since the last change."""
    total = scheduler.cycle()
    if not until_stable:
        return total
    seen: dict[str, object] = {} if total.changed else dict(total.evaluated)
    limit = max_cycles or 10 * (len(scheduler.workloads) + 10)
    for _ in range(limit):
        scheduler.apply_unpark_requests()
        result = scheduler.cycle()
        total.merge(result)
        if result.changed:
            seen = {}
            continue
        if told_as_before(seen, result.evaluated):
            break
        seen.update(result.evaluated)
    return total


def report(scheduler: Scheduler, result: CycleResult) -> dict[str, Any]:
    """``admitted``/``reserved``: what this run admitted (or reserved, waiting
    for admission checks) that still holds quota; ``preempted``: victims;
    ``pending``: every workload without quota, with reason and message."""
    by_key = scheduler.workloads
    admitted = {
        display_name(by_key[k]): flavors
        for k, flavors in sorted(result.admitted.items())
        if k in by_key and by_key[k].admission is not None
    }
    reserved = {
        display_name(by_key[k]): flavors
        for k, flavors in sorted(result.reserved.items())
        if k in by_key and by_key[k].admission is not None and not by_key[k].is_admitted
    }
    for key in sorted(result.reserved):
        workload = by_key.get(key)
        if workload is not None and workload.is_admitted and workload.admission is not None:
            admitted[display_name(workload)] = workload.admission
    pending = {}
    for key in sorted(by_key):
        workload = by_key[key]
        if workload.admission is not None:
            continue
        status = scheduler.status.get(key)
        pending[display_name(workload)] = {
            "reason": status.reason if status else "Queued",
            "message": status.message if status else "",
        }
    out: dict[str, Any] = {
        "admitted": admitted,
        "preempted": sorted(
            {
                display_name(by_key[p.victim]) if p.victim in by_key else p.victim
                for p in result.preempted
            }
        ),
        "pending": pending,
    }
    if reserved:
        out["quotaReserved"] = reserved
    return out
