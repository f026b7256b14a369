"""Cycling the groups an event time touched until each of them is stable.

Kueue's scheduler loops: a cycle that admits nothing but found heads it had
not evaluated yet (a BestEffortFIFO head it parked leaves the next one to the
next cycle) is followed by another; stable is a cycle that changes nothing
and evaluates no new head, with the same outcome. ``run_cycles`` does it for
one scheduler on its own; ``Settler`` does it for the simulator, group by
group.

Each independent group (``queues.engine.groups``) something happened in
cycles until it is stable itself; the others, stable since their last event,
are left alone. A group's cycles are what they would be were it replayed on
its own, which is what lets a replay be split.

A policy can make workloads preempt each other round and round (a StrictFIFO
victim older than its queue's own preemptor takes the freed quota back, say);
Kueue would churn, cycle after cycle. Past a bound of changing cycles the
group counts a livelock and retries later, backing off, so time moves on.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queues.engine.outcomes import CycleResult, told_as_before
from queues.engine.queueing import forget
from queues.engine.replay_records import WorkloadRecord
from queues.engine.scheduler import Scheduler

# The first back-off after a livelock when parked workloads requeue at once.
RETRY_FLOOR: Final = 1.0
# The longest a livelocked group waits before it tries again; past it, it
# waits for something else to happen in it.
RETRY_CEILING: Final = 600.0


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class CycleSink:
    """Who carries out what a settler's cycles decide (the simulator):
    ``cycled(result, now)`` with every cycle's result, before the next
    cycle; ``retry(at, group)`` to ask for a group's cycles again at ``at``
    after a livelock (infinity: only once something else happens in it).
    A class, not two callables: compiled, a method called on it is a native
    call, where a bound method is made at every event time and called
    through its Python entry point at every cycle."""

    def cycled(self, result: CycleResult, now: float) -> None:
        raise NotImplementedError

    def retry(self, at: float, group: str) -> None:
        raise NotImplementedError


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Settling:
    """One group's cycles at an event time: the changing cycles it may run
    before it counts a livelock (``limit``), the cycles it may still run
    (``rounds``: each quiet one evaluates some head for the first time, so
    it is bounded), the changing ones so far and what its cycles told
    since the last change. Fields of one record, not four dicts by group:
    made at every event time."""

    def __init__(self, limit: int, workloads: int) -> None:
        self.limit = limit
        self.rounds = limit + workloads + 1
        self.changes = 0
        self.seen: dict[str, object] = {}


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Settler:
    """Runs ``scheduler``'s cycles at one event time until the groups it is
    given are stable, counting livelocks and backing each group off after
    its own. ``records`` (each workload's by key) tells a workload's queue
    when a cycle ran in several groups at once."""

    def __init__(
        self, scheduler: Scheduler, records: Mapping[str, WorkloadRecord], requeue_delay: float
    ) -> None:
        self.scheduler = scheduler
        self.records = records
        self.requeue_delay = requeue_delay
        self.livelocks = 0
        # Each group's cycles by what they showed (a cycle in several groups
        # counts once in each, as Scheduler.cycles does): those that changed
        # something (admitted, reserved, preempted), those that changed
        # nothing but told some head something new (or ran while parked work
        # asked to queue again), and the last of a settling, which told
        # every head what it was told before (or evaluated none).
        self.changing_cycles = 0
        self.telling_cycles = 0
        self.confirming_cycles = 0
        # With ``timed`` (``bench/replay_scale.py --cycle-times``), the
        # seconds each kind of cycle took, a cycle in several groups shared
        # among them evenly: the kinds cost very differently, and what a
        # change to the engine saves shows there first.
        self.timed = False
        self.changing_seconds = 0.0
        self.telling_seconds = 0.0
        self.confirming_seconds = 0.0
        # Unparkings whose parked heads were told again in place, and the
        # cycles they counted without running them (settled_in_place).
        self.unparked_in_place = 0
        self.cycles_in_place = 0
        # True: a group's last cycle, which would tell every head as before,
        # is counted without running it where nothing it would ask can have
        # changed (below); the simulator's switch (park_in_place).
        self.confirm_unasked = False
        self.confirmed_unasked = 0
        self._backoff: dict[str, float] = {}

    def settle(
        self,
        now: float,
        touched: set[str],
        sink: CycleSink,
    ) -> None:
        """Cycles in the ``touched`` groups until each is stable, or has
        livelocked and will retry. What a cycle decides is ``sink``'s to
        carry out (``CycleSink``).

        Given at each call rather than kept, so that nothing in the
        settler points back at the simulator: a copy of either (a
        rehearsal copies the scheduler) is never wired to the other."""
        if len(touched) == 1:
            (group,) = touched
            self._settle_one(now, group, sink)
            return
        scheduler = self.scheduler
        at_once = self.requeue_delay <= 0
        active = set(touched)
        states = {
            group: _Settling(4 * scheduler.queues_in[group] + 50, scheduler.workloads_in[group])
            for group in active
        }
        while active:
            if at_once:  # parked workloads are candidates again in the very next cycle
                scheduler.apply_unpark_requests(active)
            started = time.perf_counter() if self.timed else 0.0
            result = scheduler.cycle(now, active)
            share = (time.perf_counter() - started) / len(active) if self.timed else 0.0
            sink.cycled(result, now)
            changed, evaluated = self._by_group(result, active)
            asking = scheduler.groups_asking_to_unpark() if at_once else None
            for group in sorted(active):
                if self._decided(
                    group,
                    states[group],
                    group in changed,
                    asking is not None and group in asking,
                    evaluated.get(group),
                    share,
                    now,
                    sink,
                ):
                    active.discard(group)

    def _settle_one(self, now: float, group: str, sink: CycleSink) -> None:
        """``settle`` for one group, as most event times touch (a replay of
        one tree, every one): the same cycles, counted the same, with no
        set, list or dict of groups made at every cycle (2% of a replay)."""
        scheduler = self.scheduler
        at_once = self.requeue_delay <= 0
        active = {group}
        state = _Settling(4 * scheduler.queues_in[group] + 50, scheduler.workloads_in[group])
        while True:
            if at_once:
                scheduler.apply_unpark_requests(active)
            started = time.perf_counter() if self.timed else 0.0
            result = scheduler.cycle(now, active)
            share = time.perf_counter() - started if self.timed else 0.0
            sink.cycled(result, now)
            changed = result.changed
            asking = not changed and at_once and group in scheduler.groups_asking_to_unpark()
            outcome = result.evaluated if result.evaluated else None
            if self._decided(group, state, changed, asking, outcome, share, now, sink):
                return

    def _decided(
        self,
        group: str,
        state: _Settling,
        changed: bool,
        asking: bool,
        outcome: dict[str, Any] | None,
        share: float,
        now: float,
        sink: CycleSink,
    ) -> bool:
        """What one cycle showed of ``group`` (it ``changed`` something; its
        parked work is ``asking`` to queue again; what it told its heads),
        counted; True once the group is settled: stable, or livelocked and
        to retry."""
        scheduler = self.scheduler
        state.rounds -= 1
        if changed:
            self.changing_cycles += 1
            self.changing_seconds += share
            state.changes += 1
            state.seen = {}
            if state.changes >= state.limit:
                self._livelock(group, now, sink)
                return True
        elif asking:
            self.telling_cycles += 1
            self.telling_seconds += share
        else:
            if outcome is None or told_as_before(state.seen, outcome):
                self.confirming_cycles += 1
                self.confirming_seconds += share
                forget(self._backoff, group)
                return True
            self.telling_cycles += 1
            self.telling_seconds += share
            state.seen.update(outcome)
            # The next cycle could only tell what this one told, if
            # every tree it would visit is quiet (_asks_nothing); what
            # a cycle does at its start (work backing off due by now
            # queued, a stopped queue's reservations evicted) this one did.
            if state.rounds and self.confirm_unasked and scheduler._asks_nothing(group):
                state.rounds = 0
                self.confirming_cycles += 1
                self.confirmed_unasked += 1
                scheduler.cycles += 1
        if not state.rounds:
            forget(self._backoff, group)
            return True
        return False

    def settled_in_place(self, group: str, rounds: int) -> None:
        """A group whose parked heads were told again where they were
        (``queues.engine.unparking``): the cycles it would have run, counted
        as they would have been, ``rounds`` telling ones and the last."""
        self.telling_cycles += rounds
        self.confirming_cycles += 1
        self.unparked_in_place += 1
        self.cycles_in_place += rounds + 1
        forget(self._backoff, group)

    def backoff(self, group: str) -> float | None:
        """How long ``group`` waits after its next livelock (None: the first
        back-off, it has not livelocked since it last settled)."""
        return self._backoff.get(group)

    def _livelock(self, group: str, now: float, sink: CycleSink) -> None:
        """Tried again after a back-off that doubles, up to ``RETRY_CEILING``;
        a group that still churns then is not tried again on its own (retry
        at infinity) until something else happens in it: left to retry, a
        churn whose victim is preempted last would never let a replay end."""
        self.livelocks += 1
        backoff = self._backoff.get(group, self.requeue_delay or RETRY_FLOOR)
        if backoff >= RETRY_CEILING:
            sink.retry(math.inf, group)
            return
        sink.retry(now + backoff, group)
        self._backoff[group] = min(backoff * 2, RETRY_CEILING)

    def _by_group(
        self, result: CycleResult, cycled: set[str]
    ) -> tuple[set[str], dict[str, dict[str, Any]]]:
        """The groups a cycle in ``cycled`` changed something in, and what
        it said of each group's heads."""
        if len(cycled) == 1:
            # A cycle in one group admits, preempts and evaluates only there
            # (Scheduler.cycle): nothing to look up per workload.
            (group,) = cycled
            changed = {group} if result.changed else set()
            return changed, ({group: result.evaluated} if result.evaluated else {})
        group_of = self.scheduler.group_of
        records = self.records
        changed = {group_of[records[key].cluster_queue] for key in result.admitted}
        changed |= {group_of[records[key].cluster_queue] for key in result.reserved}
        changed |= {group_of[p.cluster_queue] for p in result.preempted}
        evaluated: dict[str, dict[str, Any]] = {}
        for key, pending in result.evaluated.items():
            group = group_of[records[key].cluster_queue]
            into = evaluated.get(group)  # no setdefault: its default is built every call
            if into is None:
                evaluated[group] = {key: pending}
            else:
                into[key] = pending
        return changed, evaluated
