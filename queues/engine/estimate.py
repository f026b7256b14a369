"""When will a pending workload start? Simulate the current state forward.

Two runs bound the start. The latest lets every running workload use its
whole declared runtime and every workload without one its long runtime (the
far end of ``runtime_range``); the earliest lets each running workload finish
in ``optimism`` of what it has left (default half) and those without a
declared runtime take their short one. Pending workloads ahead of it run for
their declared runtime, else their range's end of the run; with neither they
run forever. The earliest run foresees no new arrivals; the latest one plays
``arrivals`` (work expected to come, say the last hour's again), which may
take capacity first: a higher priority, or, under BestEffortFIFO, smaller
work that fits while it does not.

Each run looks ``HORIZON`` (30 days) ahead: a start further away, or one
that never comes (work ahead of it that runs for ever, a cohort tree whose
workloads preempt each other every eviction for ever), is None. Without it,
such a tree would keep a run going for ever; with it alone, a tree churning
every 30 s took half a minute to play its 30 days, so a run stops a tree
once its state comes back the same (``queues.engine.repeats``).

``requeue_delay`` and ``eviction_delay`` are the cluster's (see
``Simulator``): a real Kueue's second and 30 s by default. Work holding quota
while it waits for admission checks (an approval) is not running: the
earliest run has them answered at once, the latest when they are due.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from queues.engine.model import Workload
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator

NEVER = float("inf")
# How far ahead the runs look (the CLI's and pages' "not within 30 days").
HORIZON = 30 * 24 * 3600.0


@dataclass(frozen=True)
class StartEstimate:
    earliest: float | None  # seconds on the scheduler's clock; None: not within HORIZON
    latest: float | None

    @property
    def known(self) -> bool:
        return self.latest is not None

    @classmethod
    def between(cls, one: float | None, other: float | None) -> StartEstimate:
        """The two runs' starts as a range. The optimistic run is not always
        the earlier one: work ending sooner can let a bigger workload ahead in
        first (and arrivals can take capacity it would have used otherwise)."""
        if one is None or other is None:
            return cls(one, other)
        return cls(min(one, other), max(one, other))


@dataclass(frozen=True)
class Pace:
    requeue_delay: float = 1.0
    eviction_delay: float = 30.0
    # How long admission checks (an approval) may take before they are
    # answered, for the latest run (the earliest has them answered at once);
    # ``check_left`` overrides it per workload already waiting for them.
    check_wait: float = 0.0
    check_left: Mapping[str, float] = field(default_factory=dict)


def _runtime(workload: Workload, early: bool) -> float:
    if workload.runtime is not None:
        return workload.runtime
    if workload.runtime_range is not None:
        short, long = workload.runtime_range
        return short if early else long
    return NEVER


def forward_run(
    scheduler: Scheduler,
    now: float,
    factor: float,
    pace: Pace,
    until: str | None = None,
    arrivals: Sequence[Workload] = (),
) -> Simulator:
    """The state as a simulation from now, not yet run; with ``until``, it
    stops once that one is admitted. ``factor`` 1 is the latest run. A group
    seen repeating itself (``queues.engine.repeats``: churning for ever) is
    left there: what it has not admitted by then it never does."""
    early = factor < 1.0
    stream = []
    for arrival in arrivals if not early else ():
        if arrival.key in scheduler.workloads or arrival.creation_time < now:
            continue
        copied = arrival.copied()
        copied.runtime = _runtime(arrival, early)
        stream.append((copied, "arrival"))
    for workload in scheduler.workloads.values():
        copied = workload.copied()
        declared = copied.runtime is not None
        copied.runtime = _runtime(workload, early)
        # Running work (not work holding quota while its checks are pending).
        if copied.is_admitted and copied.admission is not None and copied.admitted_at is not None:
            if copied.runtime != NEVER:
                done = min(copied.runtime, max(0.0, now - copied.admitted_at) + copied.work_done)
                # A declared runtime is shortened to the optimistic share of what is
                # left; a range's short end is already the optimistic guess.
                share = (1 - factor) if declared else 0.0
                copied.work_done = done + (copied.runtime - done) * share
            copied.admitted_at = now
        stream.append((copied, "state"))
    return Simulator(
        scheduler.policy,
        stream,
        start=now,
        until_admitted=until,
        horizon=now + HORIZON,
        requeue_delay=pace.requeue_delay,
        eviction_delay=pace.eviction_delay,
        check_delay=0.0 if early else pace.check_wait,
        check_delays=None if early else pace.check_left,
        stop_repeating=True,
    )


def _first_admissions(scheduler: Scheduler, run: Simulator) -> dict[str, float | None]:
    """When each of the scheduler's workloads is first admitted in ``run``."""
    result = run.run()
    return {
        key: None if record.first_admitted in (None, NEVER) else record.first_admitted
        for key, record in result.records.items()
        if key in scheduler.workloads
    }


def estimate_start(
    scheduler: Scheduler,
    key: str,
    now: float | None = None,
    *,
    optimism: float = 0.5,
    pace: Pace = Pace(),
    arrivals: Sequence[Workload] = (),
) -> StartEstimate:
    """An (earliest, latest) start time for pending workload ``key``."""
    when = scheduler.now if now is None else now
    workload = scheduler.workloads[key]
    if workload.admission is not None:
        started = workload.admitted_at if workload.admitted_at is not None else when
        return StartEstimate(started, started)
    early = _first_admissions(scheduler, forward_run(scheduler, when, optimism, pace, until=key))
    late = _first_admissions(
        scheduler, forward_run(scheduler, when, 1.0, pace, until=key, arrivals=arrivals)
    )
    return StartEstimate.between(early.get(key), late.get(key))


def estimate_all(
    scheduler: Scheduler,
    now: float | None = None,
    *,
    optimism: float = 0.5,
    pace: Pace = Pace(),
    arrivals: Sequence[Workload] = (),
) -> dict[str, StartEstimate]:
    """Start estimates for every pending workload at once: two forward runs of
    the whole state, not two per workload."""
    when = scheduler.now if now is None else now
    pending = [k for k, w in scheduler.workloads.items() if w.admission is None and w.active]
    if not pending:
        return {}
    early = _first_admissions(scheduler, forward_run(scheduler, when, optimism, pace))
    late = _first_admissions(scheduler, forward_run(scheduler, when, 1.0, pace, arrivals=arrivals))
    return {key: StartEstimate.between(early.get(key), late.get(key)) for key in pending}
