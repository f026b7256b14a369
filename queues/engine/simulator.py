"""Discrete-event simulation of a workload stream under a policy.

Events on a virtual clock: arrivals, scheduling cycles (run at every event time
until a cycle changes nothing, as Kueue's scheduler loops: ``settling``), completions after
each workload's runtime, preemptions (the victim loses the work since its last
checkpoint and queues again, keeping its place by creation time, as Kueue
does) and the delayed re-queueing of parked workloads when capacity may have
freed (Kueue waits about a second).

``requeue_delay`` is how long parked workloads wait after capacity frees
(Kueue: about a second); 0 makes them candidates again in the very next
cycle, as a Kueue rebuilt at every step does (Berth's simulated cluster).

Admission checks are answered Ready at once (``check_delay`` seconds later):
the simulator measures queueing, not people; unless ``check_delays`` says how
long a workload's checks took (a recorded approval; infinity: never answered).

With ``stop_repeating`` (without a horizon by default; estimates always) a
group seen to churn for ever (``queues.engine.repeats``) is left there as a
livelock: its first admissions stay exact, its other figures stop.

With a ``horizon`` (a what-if's window end) the clock stops there: what had
not been admitted by then was never admitted, and its wait is censored at the
horizon (see ``WorkloadRecord.censored_wait``). ``context`` names workloads
that only set the scene (already running or queued when the window opened):
they take quota and compete, but the figures do not count them.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mypy_extensions import mypyc_attr

from queues.engine import repeats
from queues.engine.arrivals import Arrivals
from queues.engine.collections_paused import fewer_collections
from queues.engine.events import (
    ARRIVE,
    CHECK,
    FINISH,
    PODS_READY,
    PODS_TIMEOUT,
    RELEASE,
    REQUEUE,
    RETRY,
    SAMPLE,
    TIMEOUT,
    UNPARK,
    Timers,
)
from queues.engine.model import CheckState, Policy, Workload
from queues.engine.queueing import forget
from queues.engine.repeats import GroupState
from queues.engine.replay_records import (
    SimulationResult,
    WorkloadRecord,
    frame_of,
    gpu_count,
    longest_run,
)
from queues.engine.scheduler import CycleResult, Scheduler
from queues.engine.settling import CycleSink, Settler
from queues.engine.unparking import DueUnparkings
from queues.engine.usage_meter import QueueTotals, UsageMeter, extend_totals

__all__ = ["SimulationResult", "Simulator", "WorkloadRecord", "gpu_count", "longest_run"]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Simulator(CycleSink):
    def __init__(
        self,
        policy: Policy,
        workloads: Iterable[tuple[Workload, str]],
        *,
        requeue_delay: float = 1.0,
        check_delay: float = 0.0,
        eviction_delay: float = 30.0,
        start: float | None = None,
        until_admitted: str | None = None,
        samples: int = 240,
        progress: Callable[[int, int], None] | None = None,
        horizon: float | None = None,
        context: Iterable[str] = (),
        check_delays: Mapping[str, float] | None = None,
        sample_every: float | None = None,
        main_resource: str | None = None,
        stop_repeating: bool | None = None,
    ) -> None:
        """``sample_every`` and ``main_resource`` default to what the stream
        asks for; a replay split into groups (``queues.engine.split``) gives
        every group the whole stream's, with its ``start``."""
        self.policy = policy
        self.scheduler = Scheduler(policy, now=0.0)
        # A preempted job takes time to stop (SIGTERM, checkpoint, exit); its
        # quota stays taken meanwhile, as in Kueue.
        self.eviction_delay = eviction_delay
        self.scheduler.defer_release = eviction_delay > 0
        self.requeue_delay = requeue_delay
        self.check_delay = check_delay
        self.check_delays = dict(check_delays or {})
        self.progress = progress
        # Called with each event (time, kind, payload) just before and just
        # after it is handled: a capacity search's deadlines, a bench's probes.
        # Hooks, not overrides: compiled (mypyc), the simulator calls its own methods
        # directly, past any replacement.
        self.before_event: Callable[[float, str, Any], None] | None = None
        self.after_event: Callable[[float, str, Any], None] | None = None
        # Called with each scheduling cycle's result: one event time can take
        # many (a burst of arrivals), and a shared-out replay must still beat.
        # Not with those counted, not run (park_in_place).
        self.after_cycle: Callable[[CycleResult], None] | None = None
        self._timers = Timers()
        self._generation: dict[str, int] = {}
        self._run_started: dict[str, float] = {}
        self._requeued: dict[str, float] = {}  # key -> when it was last evicted
        self.admission_log: list[tuple[str, float, float]] = []
        # Per independent group: when its parked workloads queue again; and,
        # for one that livelocked at the last event time there, when it is
        # tried again (infinity: once something else happens there).
        self._unpark_due: dict[str, float] = {}
        # False: due parked work always queues again and cycles, and a group's last
        # cycle always runs (what unparking and Settler.confirm_unasked are checked against).
        self.park_in_place = True
        self.unparkings = DueUnparkings()
        self._retry_due: dict[str, float] = {}
        self.context = set(context)
        self.arrivals = Arrivals(workloads, self.context)
        # The same dict as the arrivals': each workload's record once it has arrived.
        self.records = self.arrivals.records
        self.total = self.arrivals.total
        if until_admitted is not None and not self.arrivals.was_given(until_admitted):
            raise KeyError(f"until_admitted names no workload given: {until_admitted}")
        # Workloads created before the clock starts arrive when it does.
        self._floor = start if start is not None else 0.0
        frame = frame_of(self.arrivals.given(), start=start, horizon=horizon, samples=samples)
        self.start = frame.start
        self.now = self.start  # the last event time replayed
        self.until_admitted = until_admitted
        self.horizon = horizon
        self.expected_end = frame.expected_end
        self._progress_done = 0
        self.meter = UsageMeter(
            self.scheduler,
            self.start,
            sample_every=sample_every if sample_every is not None else frame.sample_every,
            main_resource=main_resource or frame.main_resource,
        )
        self.preemptions_by_reason: dict[str, int] = {}
        self.preemptions_by_queue: dict[str, dict[str, int]] = {
            name: {} for name in policy.cluster_queues
        }
        self.admissions = 0
        self.finished = 0
        self.settler = Settler(self.scheduler, self.records, requeue_delay)
        self._groups = sorted(set(self.scheduler.group_of.values()))
        self._queues_of: dict[str, list[str]] = {group: [] for group in self._groups}
        for queue, group in self.scheduler.group_of.items():
            self._queues_of[group].append(queue)
        self._last_event: dict[str, float] = {}
        self.repeats = repeats.watch_for(
            policy, self.scheduler, stop_repeating, horizon, self.arrivals.given()
        )
        self.repeating: set[str] = set()  # groups found to repeat, left there

    # ---------------------------------------------------------------- events

    def _push(self, time: float, kind: str, payload: Any) -> None:
        self._timers.push(time, kind, payload)

    def run(self) -> SimulationResult:
        with fewer_collections():  # begin and result make a tuple a workload too
            self.begin()
            self.advance()
            return self.result()

    def begin(self) -> None:
        """Every workload's arrival on the clock; ``advance`` then replays.
        Arrivals at one time come in the order given, before any other event
        then (as events pushed first on the heap would)."""
        self.arrivals.begin(self._floor)
        self.now = self.start
        ledger = self.scheduler.ledger
        if ledger is not None:  # admission fair sharing samples LocalQueue usage
            ledger.last_sample = self.start
            self._push(self.start + ledger.config.sampling_interval, SAMPLE, None)

    @property
    def next_time(self) -> float:
        """When the next event happens (infinity when the replay is over)."""
        if self.done:
            return math.inf
        return self._next_event_time()

    def _next_event_time(self) -> float:
        """When the next arrival or event happens (infinity: none is left)."""
        return min(self._timers.next_time(), self.arrivals.next_time())

    @property
    def done(self) -> bool:
        if self.until_admitted is not None:
            record = self.records.get(self.until_admitted)
            if record is not None:
                if record.first_admitted is not None:
                    return True
                if self.scheduler.group_of[record.cluster_queue] in self.repeating:
                    return True  # never admitted: its group only repeats itself
        at = self._next_event_time()
        return at == math.inf or (self.horizon is not None and at >= self.horizon)

    def advance(self, until: float = math.inf) -> bool:
        """Replay every event time before ``until`` (the whole replay by
        default); True once the replay is over. Between two calls nothing
        changes: usage stays as the last event time left it."""
        with fewer_collections():
            while not self.done and self._next_event_time() < until:
                self._step()
        return self.done

    def _step(self) -> None:
        """One event time: its events, then cycles until stable."""
        now = self.now = self._next_event_time()
        self._report_time(now)
        self.meter.sample(now)
        self.scheduler.now = now  # evictions and backoffs happen at event time
        touched: set[str] = set()
        arrived = self.arrivals.arrive(now)
        while arrived is not None:  # the scheduler holds it from now on
            self._event(now, ARRIVE, arrived, touched)
            arrived = self.arrivals.arrive(now)
        timers = self._timers
        heap = timers.heap  # changed in place
        while heap and heap[0].time == now:
            timer = timers.take()
            self._event(now, timer.kind, timer.payload, touched)
        for group in touched:
            self._last_event[group] = now
        settling = self.unparkings.apply(self.scheduler, self.settler, touched)
        self.settler.confirm_unasked = self.park_in_place
        self.settler.settle(now, settling, self)
        self.meter.settle(now)
        for group in sorted(self.scheduler.groups_asking_to_unpark()):
            if group in self._unpark_due:
                continue  # capacity freed again joins the batch already due
            if group in self.repeating:
                continue  # left where it was found to repeat
            if self.scheduler.has_parked_in(group):
                # Not before a group backing off after a livelock is tried again:
                # freed by its own churn, its parked workloads would cycle it at
                # once (requeue_delay 0), at this very instant, for ever.
                due = max(now + self.requeue_delay, self._retry_due.get(group, now))
                if due == math.inf:
                    continue  # asked again when something else happens there
                self._unpark_due[group] = due
                self._push(due, UNPARK, group)
            else:  # nothing parked, nothing to wait for
                self.scheduler.apply_unpark_requests({group})
        if self.repeats is not None and self.repeats.preempted:
            for group in self.repeats.repeating_now(
                now, self.scheduler, self._queues_of, self.state_of
            ):
                self.repeating.add(group)
                self.settler.livelocks += 1  # a loop of preemptions, only slower

    def state_of(
        self, group: str, now: float, usage: tuple[Any, ...] | None = None
    ) -> GroupState | None:
        """``repeats.group_state`` and the run's own clock for the group
        (``usage``: its ``repeats.usage_signature``, when already taken)."""
        scheduler, start = self.scheduler, self.start
        queues = self._queues_of[group]
        if usage is None:
            usage = repeats.usage_signature(scheduler, queues)
        held = repeats.group_state(scheduler, group, queues, usage, now, start)
        if held is None:
            return None
        pending = [
            event
            for event in self._timers.pending()
            if not self._cancelled(event[2], event[3])
            and group in self._group_of_event(event[2], event[3])
        ]
        due = (self._unpark_due.get(group), self._retry_due.get(group))
        clock = repeats.run_clock(scheduler, group, pending, self._run_started, due, now, start)
        return (held, clock, self.settler.backoff(group))

    def _event(self, now: float, kind: str, payload: Any, touched: set[str]) -> None:
        cancelled = self._cancelled(kind, payload)
        groups = set() if cancelled else self._group_of_event(kind, payload)
        if not cancelled and self.repeating:
            cancelled = not groups - self.repeating
        if not cancelled:
            touched |= groups
            if self._retry_due:  # something happened there: its cycles say anew
                for group in groups:
                    self._retry_due.pop(group, None)
        if self.before_event is not None:
            self.before_event(now, kind, payload)
        if not cancelled:
            self._handle(now, kind, payload)
        if self.after_event is not None:
            self.after_event(now, kind, payload)

    @property
    def given_up(self) -> set[str]:
        """The groups that churned past the last back-off (``settling``): not
        tried again on their own until something else happens in them."""
        return {group for group, at in self._retry_due.items() if at == math.inf}

    def all_records(self) -> dict[str, WorkloadRecord]:
        """Every workload's record, in the order the workloads were given
        (``Arrivals.all_records``)."""
        return self.arrivals.all_records()

    def _cancelled(self, kind: str, payload: Any) -> bool:
        """A run's timer (its completion, time-out, pods ready) set for a run
        evicted or stopped since: it happens in no group, and does nothing. A
        group that churns (``settling``) sets one at every admission; each,
        cycling the group again, would start the churn over, for ever."""
        if kind not in (FINISH, TIMEOUT, PODS_READY, PODS_TIMEOUT):
            return False
        key, generation = payload
        return bool(self._generation.get(key) != generation)

    def _group_of_event(self, kind: str, payload: Any) -> set[str]:
        """The independent groups an event happens in: a group's cycles run
        only after something happened there (what it would see on its own)."""
        if kind == SAMPLE:
            return set(self._groups)
        if kind in (UNPARK, RETRY, REQUEUE):
            return {payload}
        if kind == ARRIVE:
            queue = payload.cluster_queue
        else:
            key = payload[0] if isinstance(payload, tuple) else payload
            queue = self.records[key].cluster_queue
        return {self.scheduler.group_of[queue]}

    def result(self) -> SimulationResult:
        """The figures once ``advance`` has replayed to the end.

        Without a horizon each independent group is measured up to its own
        last event and then, to the end of the whole replay, at the rates it
        was left with (``final_rates``): the same sums a replay of the group
        on its own, extended by ``queues.engine.split.merge``, comes to."""
        now = self.now
        if self.horizon is not None:
            now = max(now, self.horizon)  # usage is measured over the whole window
            self._report_time(now)
        if self.horizon is None and len(self._groups) > 1:
            group_of = self.scheduler.group_of
            for group in self._groups:
                self.meter.close_queues(
                    self._queues_of[group], self._last_event.get(group, self.start)
                )
            rates = self.meter.final_rates()
            for queue, totals in self.meter.totals.items():
                group = group_of[queue]
                extend_totals(totals, rates[queue], now - self._last_event.get(group, self.start))
        else:
            self.meter.close(now)
        self.meter.sample(now, force=True)
        # Admissions at one time in the order their groups are named, each
        # group's in the order it made them: what its replay on its own gives.
        rank = {group: i for i, group in enumerate(self._groups)}
        group_of = self.scheduler.group_of
        self.admission_log.sort(key=lambda entry: (entry[1], rank[group_of[entry[0]]]))
        result = self._result(now, self.all_records(), self.meter.totals)
        result.final_rates = self.meter.final_rates()
        return result

    def snapshot(self, at: float, *, clamp: bool = True) -> SimulationResult:
        """The figures so far, as if the replay stopped at ``at`` (no earlier
        than the last event time replayed, before the next one): the workloads
        that had arrived by then, waits of those not admitted yet counted up to
        ``at``. Changes nothing: the replay goes on as if never asked. A
        replay already over answers as of its end; with ``clamp`` False, as
        of ``at`` still (one group of a split replay, read beside the others)."""
        if self.done and clamp:
            at = self.horizon if self.horizon is not None else self.now
        # What a replay stopped first (until_admitted) had not let arrive by ``at`` counts too.
        arrived = {
            k: r
            for k, r in self.arrivals.records_due(at).items()
            if max(r.created, self._floor) < at
        }
        return self._result(at, arrived, self.meter.totals_at(at))

    def _result(
        self, end: float, records: dict[str, WorkloadRecord], totals: dict[str, QueueTotals]
    ) -> SimulationResult:
        return SimulationResult(
            start=self.start,
            end=end,
            records=records,
            totals=totals,
            nominal=self.meter.nominal,
            preemptions_by_reason=self.preemptions_by_reason,
            preemptions_by_queue=self.preemptions_by_queue,
            series=self.meter.series,
            cycles=self.scheduler.cycles,
            admissions=self.admissions,
            livelocks=self.settler.livelocks,
            horizon=self.horizon,
            admission_log=self.admission_log,
        )

    def _report_time(self, now: float) -> None:
        """With a horizon, progress is the share of the window simulated (not
        every workload finishes inside it), in thousandths."""
        if self.horizon is None or self.progress is None:
            return
        span = max(self.horizon - self.start, 1e-9)
        done = min(1000, int(1000 * (now - self.start) / span))
        if done > self._progress_done:
            self._progress_done = done
            self.progress(done, 1000)

    def _stop_run(self, timer: tuple[str, int]) -> str:
        """The workload a timer (not ``_cancelled``) was set for, its run
        stopped and its completion cancelled."""
        key, generation = timer
        self._generation[key] = generation + 1
        forget(self._run_started, key)
        return key

    def _forget_run(self, key: str) -> None:
        """The workload leaves: its timers left behind are cancelled all the
        same (no generation matches), and a replay's million do not stay."""
        forget(self._generation, key)
        forget(self._run_started, key)

    def _handle(self, now: float, kind: str, payload: Any) -> None:
        if kind == ARRIVE:
            workload: Workload = payload
            self.scheduler.add(workload)
            if self.repeats is not None:
                self.repeats.arrived(self.scheduler.group_of[workload.cluster_queue])
            if workload.key in self.scheduler.backing_off:
                group = self.scheduler.group_of[workload.cluster_queue]
                self._push(workload.requeue_at or now, REQUEUE, group)
            if workload.admission is not None:  # a snapshot: already running
                if workload.admitted_at is not None:
                    ran = max(0.0, now - workload.admitted_at)
                    workload.past_execution += ran  # admitted since then: it counts
                    if workload.runtime is not None:
                        elapsed = min(workload.runtime, ran)
                        workload.work_done = max(workload.work_done, elapsed)
                if not workload.is_admitted:  # quota reserved, its checks not all Ready
                    delay = self.check_delays.get(workload.key, self.check_delay)
                    if math.isfinite(delay):
                        self._push(now + max(0.0, delay), CHECK, workload.key)
                    return
                self.records[workload.key].first_admitted = workload.admitted_at
                self._started(workload, now)
        elif kind == FINISH:
            key, _ = payload
            self._forget_run(key)
            self.scheduler.finish(key)
            self.records[key].finished = now
            self.finished += 1
            if self.progress is not None and self.horizon is None:
                self.progress(self.finished, self.total)
        elif kind == TIMEOUT:
            key = self._stop_run(payload)
            self._forget_run(key)
            # Kueue deactivates it: it frees its quota and is not queued again.
            self.scheduler.finish(key)
            self.records[key].timed_out = now
        elif kind == PODS_READY:
            key, _ = payload
            self.scheduler.pods_not_ready.discard(key)
        elif kind == PODS_TIMEOUT:
            key = self._stop_run(payload)
            record = self.records[key]
            record.pods_ready_timeouts += 1
            if self.scheduler.pods_ready_timeout(key):
                record.requeue_limit_exceeded = now
            else:
                self._requeued[key] = now
                workload = self.scheduler.workloads[key]
                group = self.scheduler.group_of[workload.cluster_queue]
                self._push(workload.requeue_at or now, REQUEUE, group)
        elif kind == REQUEUE:
            pass  # the cycle that follows queues what is due
        elif kind == SAMPLE:
            self.scheduler.sample_usage()
            ledger = self.scheduler.ledger
            # Only while something else will happen.
            if ledger is not None and (self._timers.heap or self.arrivals.pending):
                self._push(now + ledger.config.sampling_interval, SAMPLE, None)
        elif kind == UNPARK:
            del self._unpark_due[payload]
            if self.park_in_place and self.after_event is None:
                self.unparkings.hold(self.scheduler, payload)
            else:
                self.scheduler.apply_unpark_requests({payload})
        elif kind == RELEASE:
            victim = self.scheduler.workloads.get(payload)
            if victim is not None and victim.evicting:
                self.scheduler.release(payload)
        elif kind == CHECK:
            checked = self.scheduler.workloads.get(payload)
            if checked is not None and checked.admission is not None:
                for check in list(checked.check_states):
                    checked.check_states[check] = CheckState.READY
                # Admitted once its checks pass (until then it only reserves quota).
                self._admitted(checked.key, now)
                self._started(checked, now)

    def cycled(self, result: CycleResult, now: float) -> None:
        """What one of an event time's cycles decided, carried out."""
        self._apply(result, now)
        if self.after_cycle is not None:
            self.after_cycle(result)

    def retry(self, at: float, group: str) -> None:
        self._retry_due[group] = at
        if at < math.inf:
            self._push(at, RETRY, group)

    def _apply(self, result: CycleResult, now: float) -> None:
        for key in result.admitted:
            self._admitted(key, now)
            self._started(self.scheduler.workloads[key], now)
        for key in result.reserved:
            delay = self.check_delays.get(key, self.check_delay)
            if math.isfinite(delay):  # never answered: it holds its quota, waiting
                self._push(now + delay, CHECK, key)
        for preemption in result.preempted:
            self._preempted(
                preemption.victim, preemption.reason.value, preemption.cluster_queue, now
            )

    def _admitted(self, key: str, now: float) -> None:
        self.admissions += 1
        record = self.records[key]
        queued = self._requeued.get(key, record.created)
        self.admission_log.append((record.cluster_queue, now, max(0.0, now - queued)))
        if record.first_admitted is None:
            record.first_admitted = now

    def _started(self, workload: Workload, now: float) -> None:
        """Admitted: its pods start (``pods_ready_after`` seconds), then it runs
        what is left of its runtime, unless waitForPodsReady or its maximum
        execution time stops it first."""
        key = workload.key
        generation = self._generation.get(key, 0) + 1
        self._generation[key] = generation
        self._run_started[key] = now
        startup = workload.pods_ready_after
        config = self.scheduler.policy.wait_for_pods_ready
        if startup > 0:
            self.scheduler.pods_not_ready.add(key)
            if config is not None and startup > config.timeout:
                self._push(now + config.timeout, PODS_TIMEOUT, (key, generation))
                return
            if math.isfinite(startup):
                self._push(now + startup, PODS_READY, (key, generation))
        remaining = startup + max(0.0, (workload.runtime or 0.0) - workload.work_done)
        if workload.max_execution_time is not None:
            allowed = max(0.0, workload.max_execution_time - workload.past_execution)
            if allowed < remaining:
                self._push(now + allowed, TIMEOUT, (key, generation))
                return
        if math.isfinite(remaining):  # a workload that runs forever never finishes
            self._push(now + remaining, FINISH, (key, generation))

    def _preempted(self, key: str, reason: str, queue: str, now: float) -> None:
        workload = self.scheduler.workloads[key]
        record = self.records[key]
        record.preemptions += 1
        record.preemptions_by_reason[reason] = record.preemptions_by_reason.get(reason, 0) + 1
        self.preemptions_by_reason[reason] = self.preemptions_by_reason.get(reason, 0) + 1
        by_queue = self.preemptions_by_queue[queue]
        by_queue[reason] = by_queue.get(reason, 0) + 1
        self._requeued[key] = now  # Kueue marks it Requeued as it evicts it
        if self.repeats is not None:  # only a preemption starts a turn of a churn
            self.repeats.preempted.add(self.scheduler.group_of[queue])
        if self.scheduler.defer_release:
            self._push(now + self.eviction_delay, RELEASE, key)
        started = self._run_started.pop(key, None)
        self._generation[key] = self._generation.get(key, 0) + 1  # cancel its completion
        if started is None:
            return
        workload.past_execution += now - started  # counts towards its maximum
        # It runs once its pods are ready: the start-up is not work done.
        progress = workload.work_done + max(0.0, now - started - workload.pods_ready_after)
        interval = workload.checkpoint_interval
        saved = math.floor(progress / interval) * interval if interval else 0.0
        lost = progress - saved
        workload.work_done = saved
        record.lost_seconds += lost
        record.lost_gpu_seconds += lost * record.gpus
