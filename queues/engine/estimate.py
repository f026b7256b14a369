"""When will a pending workload start? Simulate the current state forward.

The latest estimate lets every running workload use its whole declared
runtime; the earliest lets each finish in ``optimism`` of what it has left
(default half). Pending workloads ahead of it run for their declared runtime
(or forever, when they declare none). New arrivals are not foreseen.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator

NEVER = float("inf")


@dataclass(frozen=True)
class StartEstimate:
    earliest: float | None  # seconds on the scheduler's clock; None: not within the horizon
    latest: float | None

    @property
    def known(self) -> bool:
        return self.latest is not None


def _first_admissions(
    scheduler: Scheduler, now: float, factor: float, until: str | None = None
) -> dict[str, float | None]:
    """When each workload is first admitted if the state runs forward from now;
    with ``until``, stop once that one is."""
    stream = []
    for workload in scheduler.workloads.values():
        copied = copy.deepcopy(workload)
        if copied.runtime is None:
            copied.runtime = NEVER
        if copied.admission is not None and copied.admitted_at is not None:
            if copied.runtime != NEVER:
                done = min(copied.runtime, max(0.0, now - copied.admitted_at) + copied.work_done)
                copied.work_done = done + (copied.runtime - done) * (1 - factor)
            copied.admitted_at = now
        stream.append((copied, "state"))
    simulator = Simulator(scheduler.policy, stream, start=now, until_admitted=until)
    result = simulator.run()
    return {
        key: None if record.first_admitted in (None, NEVER) else record.first_admitted
        for key, record in result.records.items()
    }


def _start(scheduler: Scheduler, key: str, now: float, factor: float) -> float | None:
    return _first_admissions(scheduler, now, factor, until=key).get(key)


def estimate_start(
    scheduler: Scheduler, key: str, now: float | None = None, *, optimism: float = 0.5
) -> StartEstimate:
    """An (earliest, latest) start time for pending workload ``key``."""
    when = scheduler.now if now is None else now
    workload = scheduler.workloads[key]
    if workload.admission is not None:
        started = workload.admitted_at if workload.admitted_at is not None else when
        return StartEstimate(started, started)
    return StartEstimate(_start(scheduler, key, when, optimism), _start(scheduler, key, when, 1.0))


def estimate_all(
    scheduler: Scheduler, now: float | None = None, *, optimism: float = 0.5
) -> dict[str, StartEstimate]:
    """Start estimates for every pending workload at once: two forward runs of
    the whole state, not two per workload."""
    when = scheduler.now if now is None else now
    pending = [k for k, w in scheduler.workloads.items() if w.admission is None and w.active]
    if not pending:
        return {}
    early = _first_admissions(scheduler, when, optimism)
    late = _first_admissions(scheduler, when, 1.0)
    return {key: StartEstimate(early.get(key), late.get(key)) for key in pending}
