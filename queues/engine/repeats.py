"""A group whose state comes back, shifted in time: it churns for ever.

A cohort tree can churn with time passing between its turns. A gang preempts
a workload whose eviction takes 30 s; once the victim is gone the gang's
flavor assignment changes and it no longer fits; the victim is admitted
again, and the gang preempts it again. Settling's livelock bound does not
see it (each turn is at a later event time), so a start estimate's forward
run played its 30 days turn by turn, some 80,000 turns, to say "not within
30 days": half a minute for one ``berth why``.

If everything that decides a group's future is the same at two event times,
but for being shifted by the time between them, the group does from the
later one what it did from the earlier one, again and again: a workload not
admitted by then never is. ``GroupState`` is that picture of a group, and
two pictures are compared whole (by equality, not by a hash).

What it holds, per workload of the group: everything ``Workload`` carries
that a decision reads (``SCHEDULING_FIELDS``), where it waits (queued and in
which order, parked, the sticky preemptor, the resting StrictFIFO head,
backing off), what it was last told; per queue, its usage; which of the
group's trees ask for their parked work to queue again; and the run's own
clock for the group (``Simulator`` gives it): its timers, parked work's
requeue, a livelocked group's retry and back-off, when each run started.

Times are kept as the run's clock shifts them: a time the run set (an
admission, an eviction, a back-off's end: at or after its start) as seconds
from now, one it did not (a creation time, a recorded eviction) as it is.
Two times of one kind compare the same at both event times (as floats, only
as long as adding a duration rounds alike at both: it does within one power
of two of the clock, and a review's fuzzing across them, at an epoch start
with fractional runtimes, found no run that differed). Across kinds,
only queue order mixes them (a creation time against an eviction time):
a state is only taken while every such eviction time is later than every
such creation time, which then holds at every later event time too.

Only where the rest of the state is known to be the same: no admission fair
sharing (a decaying usage ledger), no fair sharing, no waitForPodsReady, no
topology-aware placement (``watchable``), and no arrivals left to come in
the group (``RepeatWatch.arriving``).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from queues.engine.model import Policy, Workload
from queues.engine.scheduler import Scheduler

# The fields of ``Workload`` a decision reads, and the time fields among them
# (kept as seconds from now when the run set them). ``evictions`` counts, and
# ``past_execution`` only matters under a maximum execution time (added then);
# ``runtime_range`` is read before a run, not during one. Every field of
# ``Workload`` is in one of these, in ``ORDER_FIELDS`` (its queue order:
# ``_queue_order``) or in ``UNREAD_FIELDS``: a test holds them
# to that, so a new field is not left out unsaid.
TIME_FIELDS = ("admitted_at", "requeue_at")
ORDER_FIELDS = ("creation_time", "queued_at")
SCHEDULING_FIELDS = (
    "name",
    "namespace",
    "cluster_queue",
    "local_queue",
    "pod_sets",
    "priority",
    "runtime",
    "checkpoint_interval",
    "max_execution_time",
    "active",
    "evicting",
    "work_done",
    "pods_ready_after",
    "requeue_count",
)
DICT_FIELDS = (
    "admission",
    "check_states",
    "check_retry_after",
    "admitted_counts",
    "topology_assignment",
)
UNREAD_FIELDS = ("evictions", "past_execution", "runtime_range", "key")

GroupState = tuple[Any, ...]


def watchable(policy: Policy, scheduler: Scheduler) -> bool:
    """Whether ``GroupState`` holds all of a group's future under this policy."""
    return (
        not policy.fair_sharing
        and policy.admission_fair_sharing is None
        and policy.wait_for_pods_ready is None
        and scheduler.placer is None
        and scheduler.ledger is None
    )


def watch_for(
    policy: Policy,
    scheduler: Scheduler,
    stop_repeating: bool | None,
    horizon: float | None,
    arriving: Iterable[Workload] = (),
) -> RepeatWatch | None:
    """What watches a run given ``arriving`` for repeats, if it stops them
    (``stop_repeating``; None: when it has no horizon, else it would never
    end) and can see them."""
    if not (horizon is None if stop_repeating is None else stop_repeating):
        return None
    if not watchable(policy, scheduler):
        return None
    watch = RepeatWatch()
    for workload in arriving:
        group = scheduler.group_of[workload.cluster_queue]
        watch.arriving[group] = watch.arriving.get(group, 0) + 1
    return watch


def shifted(at: float | None, now: float, start: float) -> tuple[str, float] | None:
    """A time as ``GroupState`` keeps it (see the module's docstring)."""
    if at is None:
        return None
    if math.isinf(at) or at < start:
        return ("at", at)
    return ("in", at - now)


def _nested(value: Any) -> Any:
    """A dict field as a sorted tuple, dicts within it too."""
    if isinstance(value, dict):
        return tuple(sorted((key, _nested(item)) for key, item in value.items()))
    return value


def _queue_order(workload: Workload, start: float) -> float | None:
    """The workload's queue-order time when the run set it (an eviction
    during the run), else None: its creation time, or one from before."""
    queued = workload.queued_at
    if queued is None or queued == workload.creation_time or queued < start:
        return None
    return queued


def _workload_state(workload: Workload, now: float, start: float) -> tuple[Any, ...]:
    moved = _queue_order(workload, start)
    return (
        tuple(getattr(workload, name) for name in SCHEDULING_FIELDS),
        tuple(shifted(getattr(workload, name), now, start) for name in TIME_FIELDS),
        workload.creation_time,
        ("created", workload.queued_at) if moved is None else ("in", moved - now),
        tuple(_nested(getattr(workload, name)) for name in DICT_FIELDS),
        workload.past_execution if workload.max_execution_time is not None else None,
    )


def group_state(
    scheduler: Scheduler,
    group: str,
    queues: Iterable[str],
    usage: tuple[Any, ...],
    now: float,
    start: float,
) -> GroupState | None:
    """The scheduler's part of ``group``'s state (its ``queues``, whose
    ``usage_signature`` is ``usage``, taken once for both); None when some
    workload of the group is in none of the places looked at."""
    seen: set[str] = set()
    per_queue = []
    for name in queues:
        pending = scheduler.queues[name]
        queued = tuple(w.key for w in pending.queued())
        parked = tuple(sorted(pending.parked))
        resting = pending.resting
        holding = tuple(sorted(scheduler.reserved[name]))
        seen.update(queued, parked, holding)
        per_queue.append(
            (
                name,
                queued,
                parked,
                pending.sticky,
                resting.key if resting is not None else None,
                holding,
            )
        )
    backing_off = tuple(
        sorted(
            key
            for key, w in scheduler.backing_off.items()
            if scheduler.group_of[w.cluster_queue] == group
        )
    )
    seen.update(backing_off)
    if len(seen) != scheduler.workloads_in[group]:
        return None
    workloads = []
    latest_fixed = -math.inf
    earliest_moved = math.inf
    for key in sorted(seen):
        workload = scheduler.workloads.get(key)
        if workload is None:
            return None
        moved = _queue_order(workload, start)
        if moved is None:
            latest_fixed = max(latest_fixed, workload.queue_order_time)
        else:
            earliest_moved = min(earliest_moved, moved)
        status = scheduler.status.get(key)
        told = (status.reason, status.message) if status is not None else None
        workloads.append(
            (
                _workload_state(workload, now, start),
                told,
                key in scheduler.unstamped,
                key in scheduler.pods_not_ready,
            )
        )
    if earliest_moved <= latest_fixed:
        return None  # shifted on, some eviction would pass a creation in queue order
    asking = scheduler.roots_asking_to_unpark(group)
    return (tuple(per_queue), usage, backing_off, tuple(workloads), asking)


def run_clock(
    scheduler: Scheduler,
    group: str,
    pending: Iterable[tuple[float, int, str, Any]],
    run_started: Mapping[str, float],
    due: tuple[float | None, float | None],
    now: float,
    start: float,
) -> tuple[Any, ...]:
    """The run's own clock for ``group``: its ``pending`` timers (the heap's
    events there, none cancelled), when its parked work queues again and it
    is retried after a livelock (``due``), and when each of its workloads'
    runs started (``run_started``)."""
    timers = tuple(
        (shifted(at, now, start), kind, payload[0] if isinstance(payload, tuple) else payload)
        for at, _, kind, payload in sorted(pending)
    )
    present = scheduler.workloads  # a run stopped otherwise leaves its start
    started = sorted(
        (key, shifted(at, now, start))
        for key, at in run_started.items()
        if key in present and scheduler.group_of[present[key].cluster_queue] == group
    )
    return (timers, tuple(shifted(at, now, start) for at in due), tuple(started))


def usage_signature(scheduler: Scheduler, queues: Iterable[str]) -> tuple[Any, ...]:
    """A cheap function of a group's state (what its ``queues`` use): two equal
    states have equal signatures, so the whole states are only compared where
    these are equal. A draining replay's groups preempt thousands of times
    after their last arrival, each state a walk over every timer."""
    nodes = scheduler.tree.queues
    return tuple(tuple(sorted(nodes[name].usage.items())) for name in queues)


class RepeatWatch:
    """Brent's cycle finding over a group's states, one per event time that
    preempted there: the state kept is replaced at every power of two of
    states taken since, so a group that repeats every ``n`` such times is
    seen within a few times ``n`` of them, holding one state per group."""

    def __init__(self) -> None:
        # The groups that preempted at the event time being replayed, and
        # how many workloads are yet to arrive in each group.
        self.preempted: set[str] = set()
        self.arriving: dict[str, int] = {}
        # Per group: the state kept, its signature and when it was taken.
        self._kept: dict[str, tuple[GroupState, tuple[Any, ...], float]] = {}
        self._taken: dict[str, int] = {}
        self._power: dict[str, int] = {}
        # Each group found to repeat: the seconds between two of its states.
        self.period: dict[str, float] = {}

    def saw(
        self,
        group: str,
        signature: tuple[Any, ...],
        state_of: Callable[[], GroupState | None],
        now: float,
    ) -> bool:
        """Given the group's ``usage_signature`` at ``now`` and how to take its
        state: True when a state kept from an earlier time is the same (the
        group repeats from here on). The state is taken only to compare with
        a kept one of the same signature, or to be kept."""
        kept = self._kept.get(group)
        state: GroupState | None = None
        if kept is not None and kept[1] == signature and now > kept[2]:
            state = state_of()
            if state is not None and state == kept[0]:
                self.period[group] = now - kept[2]
                return True
        taken = self._taken.get(group, 0) + 1
        power = self._power.get(group, 1)
        if kept is None or taken >= power:
            state = state if state is not None else state_of()
            if state is not None:  # else the one kept stays, until the next power
                self._kept[group] = (state, signature, now)
            self._power[group] = power * 2
            taken = 0
        self._taken[group] = taken
        return False

    def repeating_now(
        self,
        now: float,
        scheduler: Scheduler,
        queues_of: Mapping[str, list[str]],
        state_of: Callable[[str, float, tuple[Any, ...]], GroupState | None],
    ) -> list[str]:
        """Each group that preempted at ``now`` whose state is one it had
        before (``state_of(group, now, usage_signature)`` takes it). Once no
        arrival is left there: from then on it sees nothing but what its
        state holds, and replayed on its own, split, it stops as here."""
        groups, self.preempted = sorted(self.preempted), set()
        found = []
        for group in groups:
            if self.arriving.get(group):
                continue
            signature = usage_signature(scheduler, queues_of[group])
            if self.saw(group, signature, functools.partial(state_of, group, now, signature), now):
                found.append(group)
        return found

    def arrived(self, group: str) -> None:
        self.arriving[group] -= 1
