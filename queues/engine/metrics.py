"""Figures from a simulation: time to admission, usage against nominal quota,
borrowing and lending, preemptions and the work they cost.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from queues.engine.simulator import SimulationResult, WorkloadRecord
from queues.quantity import unit_for


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted ``values`` (p in 0..100)."""
    if not values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(values)))
    return values[rank - 1]


def wait_stats(records: Iterable[WorkloadRecord], end: float) -> dict[str, Any]:
    """Time to admission: avg, p50, p95, max over every workload, those never
    admitted by ``end`` counting the time they had waited by then
    (right-censored: the true wait is at least that). ``at_least`` names the
    figures that are therefore lower bounds: avg and max as soon as one
    workload is censored, a percentile when a censored wait is at or below
    its rank (the true order statistic can only be larger; one above the rank
    leaves it exact)."""
    # Exact waits sort before censored ones of the same length: a tie leaves it exact.
    waits = sorted((w, censored) for w, censored in (r.censored_wait(end) for r in records))
    never = sum(1 for _, censored in waits if censored)
    stats: dict[str, Any] = {"admitted": len(waits) - never, "never_admitted": never}
    if not waits:
        return {**stats, "avg": None, "p50": None, "p95": None, "max": None, "at_least": []}
    values = [w for w, _ in waits]
    at_least = ["avg"] if never else []
    for key, p in (("p50", 50), ("p95", 95)):
        rank = max(1, math.ceil(p / 100 * len(values)))
        stats[key] = values[rank - 1]
        if any(censored for _, censored in waits[:rank]):
            at_least.append(key)
    if never:
        at_least.append("max")
    return {
        **stats,
        "avg": sum(values) / len(values),
        "max": values[-1],
        "at_least": at_least,
    }


def _per_unit(resource: str, value: float) -> float:
    """Resource-seconds in display units (cores, GiB, counts)."""
    unit = unit_for(resource).value
    if unit == "milli":
        return value / 1000
    if unit == "bytes":
        return value / 2**30
    return value


def summarize(result: SimulationResult) -> dict[str, Any]:
    """The figures of a run. Waits and workload counts cover the measured
    workloads (not the context a window opened with); usage, borrowing and
    preemptions cover everything that held quota."""
    everything = list(result.records.values())
    records = [r for r in everything if r.measured]
    # Grouped once: a thousand queues over fifty thousand records otherwise.
    by_queue: dict[str, list[WorkloadRecord]] = {}
    lost_by_queue: dict[str, float] = {}
    for record in everything:
        lost_by_queue[record.cluster_queue] = (
            lost_by_queue.get(record.cluster_queue, 0.0) + record.lost_gpu_seconds
        )
        if record.measured:
            by_queue.setdefault(record.cluster_queue, []).append(record)
    queues: dict[str, Any] = {}
    for name, totals in result.totals.items():
        members = by_queue.get(name, [])
        resources: dict[str, Any] = {}
        for (flavor, resource), nominal in sorted(result.nominal[name].items()):
            fr = (flavor, resource)
            used = totals.used.get(fr, 0.0)
            entry = resources.setdefault(
                resource, {"used": 0.0, "nominal": 0.0, "borrowed": 0.0, "lent": 0.0}
            )
            entry["used"] += _per_unit(resource, used)
            entry["nominal"] += _per_unit(resource, nominal * result.elapsed)
            entry["borrowed"] += _per_unit(resource, totals.borrowed.get(fr, 0.0))
            entry["lent"] += _per_unit(resource, totals.lent.get(fr, 0.0))
        for figures in resources.values():
            figures["usage_ratio"] = (
                figures["used"] / figures["nominal"] if figures["nominal"] else None
            )
        queues[name] = {
            "workloads": len(members),
            "finished": sum(1 for r in members if r.finished is not None),
            "timed_out": sum(1 for r in members if r.timed_out is not None),
            "never_admitted": sum(1 for r in members if r.censored_wait(result.end)[1]),
            "time_to_admission": wait_stats(members, result.end),
            "resource_seconds": resources,
            "preemptions": result.preemptions_by_queue.get(name, {}),
            "lost_gpu_seconds": lost_by_queue.get(name, 0.0),
        }
    by_class: dict[str, list[WorkloadRecord]] = {}
    for record in records:
        by_class.setdefault(record.workload_class, []).append(record)
    classes: dict[str, Any] = {}
    for name in sorted(by_class):
        members = by_class[name]
        reasons: dict[str, int] = {}
        for record in members:
            for reason, count in record.preemptions_by_reason.items():
                reasons[reason] = reasons.get(reason, 0) + count
        classes[name] = {
            "workloads": len(members),
            "time_to_admission": wait_stats(members, result.end),
            "preemptions": sum(r.preemptions for r in members),
            # The reasons the class's workloads were preempted (they were the victims).
            "preemptions_by_reason": dict(sorted(reasons.items())),
            "lost_gpu_seconds": sum(r.lost_gpu_seconds for r in members),
        }
    return {
        "simulated_seconds": result.elapsed,
        "workloads": len(records),
        "admissions": result.admissions,
        "cycles": result.cycles,
        # Times the policy made workloads preempt each other round and round.
        "livelocks": result.livelocks,
        "time_to_admission": wait_stats(records, result.end),
        "never_admitted": sum(1 for r in records if r.censored_wait(result.end)[1]),
        "timed_out": sum(1 for r in records if r.timed_out is not None),
        "preemptions": dict(sorted(result.preemptions_by_reason.items())),
        "lost_gpu_seconds": sum(r.lost_gpu_seconds for r in everything),
        "cluster_queues": queues,
        "classes": classes,
    }
