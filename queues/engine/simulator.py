"""Discrete-event simulation of a workload stream under a policy.

Events on a virtual clock: arrivals, scheduling cycles (run at every event time
until a cycle changes nothing, as Kueue's scheduler loops), completions after
each workload's runtime, preemptions (the victim loses the work since its last
checkpoint and queues again, keeping its place by creation time, as Kueue
does) and the delayed re-queueing of parked workloads when capacity may have
freed (Kueue waits about a second).

Admission checks are answered Ready at once (``check_delay`` seconds later):
the simulator measures queueing, not people.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from queues.engine.model import CheckState, FlavorResource, Policy, Workload
from queues.engine.quota import Node
from queues.engine.scheduler import CycleResult, Scheduler

ARRIVE, FINISH, UNPARK, CHECK, RETRY, RELEASE = (
    "arrive",
    "finish",
    "unpark",
    "check",
    "retry",
    "release",
)


@dataclass
class WorkloadRecord:
    key: str
    cluster_queue: str
    workload_class: str
    priority: int
    created: float
    gpus: int
    first_admitted: float | None = None
    finished: float | None = None
    preemptions: int = 0
    preemptions_by_reason: dict[str, int] = field(default_factory=dict)
    lost_seconds: float = 0.0  # of runtime redone after preemptions
    lost_gpu_seconds: float = 0.0

    @property
    def wait(self) -> float | None:
        if self.first_admitted is None:
            return None
        return max(0.0, self.first_admitted - max(self.created, 0.0))


@dataclass
class QueueTotals:
    """Integrals over time per flavor × resource: resource-seconds."""

    used: dict[FlavorResource, float] = field(default_factory=dict)
    borrowed: dict[FlavorResource, float] = field(default_factory=dict)
    lent: dict[FlavorResource, float] = field(default_factory=dict)


@dataclass
class SimulationResult:
    start: float
    end: float
    records: dict[str, WorkloadRecord]
    totals: dict[str, QueueTotals]
    nominal: dict[str, dict[FlavorResource, int]]
    preemptions_by_reason: dict[str, int]
    preemptions_by_queue: dict[str, dict[str, int]]
    series: dict[str, Any]
    cycles: int
    admissions: int
    livelocks: int = 0

    @property
    def elapsed(self) -> float:
        return max(self.end - self.start, 1e-9)


def gpu_count(workload: Workload) -> int:
    return sum(p.count * p.requests.get("nvidia.com/gpu", 0) for p in workload.pod_sets)


class Simulator:
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
    ) -> None:
        self.policy = policy
        self.scheduler = Scheduler(policy, now=0.0)
        # A preempted job takes time to stop (SIGTERM, checkpoint, exit); its
        # quota stays taken meanwhile, as in Kueue.
        self.eviction_delay = eviction_delay
        self.scheduler.defer_release = eviction_delay > 0
        self.requeue_delay = requeue_delay
        self.check_delay = check_delay
        self.progress = progress
        self._events: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()
        self._generation: dict[str, int] = {}
        self._run_started: dict[str, float] = {}
        self._unpark_due: float | None = None
        self.records: dict[str, WorkloadRecord] = {}
        self._workloads: dict[str, Workload] = {}
        self._classes: dict[str, str] = {}
        for workload, workload_class in workloads:
            self._workloads[workload.key] = workload
            self._classes[workload.key] = workload_class
        self.total = len(self._workloads)
        # The clock starts at ``start`` (default: the first arrival, at 0 or later);
        # workloads created earlier arrive then.
        self._floor = start if start is not None else 0.0
        arrivals = [max(w.creation_time, self._floor) for w in self._workloads.values()]
        self.start = start if start is not None else min(arrivals, default=0.0)
        self.until_admitted = until_admitted
        last = max(arrivals, default=0.0)
        horizon = last + max((w.runtime or 0.0 for w in self._workloads.values()), default=1.0)
        self._sample_every = max((horizon - self.start) / max(samples, 1), 1e-3)
        self._next_sample = self.start
        # Charts follow GPUs when the stream asks for any, else CPU cores.
        self.main_resource = (
            "nvidia.com/gpu" if any(gpu_count(w) for w in self._workloads.values()) else "cpu"
        )
        self.series: dict[str, Any] = {
            "t": [],
            "resource": self.main_resource,
            "usage": {},
            "pending": {},
            "borrowed": {},
        }
        self.totals = {name: QueueTotals() for name in policy.cluster_queues}
        self.nominal = {
            name: {fr: q.nominal for fr, q in self.scheduler.tree.queues[name].quotas.items()}
            for name in policy.cluster_queues
        }
        self.preemptions_by_reason: dict[str, int] = {}
        self.preemptions_by_queue: dict[str, dict[str, int]] = {
            name: {} for name in policy.cluster_queues
        }
        self._last_integral = self.start
        self.admissions = 0
        self.finished = 0
        self.livelocks = 0
        self._retry_backoff = requeue_delay

    # ---------------------------------------------------------------- events

    def _push(self, time: float, kind: str, payload: Any) -> None:
        heapq.heappush(self._events, (time, next(self._seq), kind, payload))

    def run(self) -> SimulationResult:
        for key, workload in self._workloads.items():
            self.records[key] = WorkloadRecord(
                key,
                workload.cluster_queue,
                self._classes[key],
                workload.priority,
                workload.creation_time,
                gpu_count(workload),
            )
            self._push(max(workload.creation_time, self._floor), ARRIVE, workload)
        now = self.start
        while self._events:
            now = self._events[0][0]
            self._integrate(now)
            while self._events and self._events[0][0] == now:
                _, _, kind, payload = heapq.heappop(self._events)
                self._handle(now, kind, payload)
            self._schedule(now)
            if self.until_admitted and self.records[self.until_admitted].first_admitted is not None:
                break
            if self.scheduler.has_unpark_requests and self._unpark_due is None:
                if any(q.parked for q in self.scheduler.queues.values()):
                    self._unpark_due = now + self.requeue_delay
                    self._push(self._unpark_due, UNPARK, None)
                else:  # nothing parked, nothing to wait for
                    self.scheduler.apply_unpark_requests()
        self._integrate(now)
        self._sample(now, force=True)
        return SimulationResult(
            start=self.start,
            end=now,
            records=self.records,
            totals=self.totals,
            nominal=self.nominal,
            preemptions_by_reason=self.preemptions_by_reason,
            preemptions_by_queue=self.preemptions_by_queue,
            series=self.series,
            cycles=self.scheduler.cycles,
            admissions=self.admissions,
            livelocks=self.livelocks,
        )

    def _handle(self, now: float, kind: str, payload: Any) -> None:
        if kind == ARRIVE:
            workload: Workload = payload
            self.scheduler.add(workload)
            if workload.admission is not None:  # a snapshot: already running
                if workload.admitted_at is not None and workload.runtime is not None:
                    elapsed = min(workload.runtime, max(0.0, now - workload.admitted_at))
                    workload.work_done = max(workload.work_done, elapsed)
                self.records[workload.key].first_admitted = workload.admitted_at
                self._started(workload, now)
        elif kind == FINISH:
            key, generation = payload
            if self._generation.get(key) != generation:
                return  # evicted since: this completion was cancelled
            self.scheduler.finish(key)
            self.records[key].finished = now
            self.finished += 1
            if self.progress is not None:
                self.progress(self.finished, self.total)
        elif kind == UNPARK:
            self._unpark_due = None
            self.scheduler.apply_unpark_requests()
        elif kind == RELEASE:
            victim = self.scheduler.workloads.get(payload)
            if victim is not None and victim.evicting:
                self.scheduler.release(payload)
        elif kind == CHECK:
            checked = self.scheduler.workloads.get(payload)
            if checked is not None and checked.admission is not None:
                for check in list(checked.check_states):
                    checked.check_states[check] = CheckState.READY
                self._started(checked, now)

    def _schedule(self, now: float) -> None:
        """Cycle until nothing changes. A policy can make workloads preempt each
        other round and round (a StrictFIFO victim older than its queue's own
        preemptor takes the freed quota back, say); Kueue would churn, cycle
        after cycle. Past a bound the simulator counts a livelock and retries
        later, backing off, so time moves on."""
        limit = 4 * len(self.scheduler.queues) + 50
        for _ in range(limit):
            result = self.scheduler.cycle(now)
            self._apply(result, now)
            if not result.changed:
                self._retry_backoff = self.requeue_delay
                return
        self.livelocks += 1
        self._push(now + self._retry_backoff, RETRY, None)
        self._retry_backoff = min(self._retry_backoff * 2, 600.0)

    def _apply(self, result: CycleResult, now: float) -> None:
        for key in result.admitted:
            self._admitted(key, now)
            self._started(self.scheduler.workloads[key], now)
        for key in result.reserved:
            self._admitted(key, now)
            self._push(now + self.check_delay, CHECK, key)
        for preemption in result.preempted:
            self._preempted(
                preemption.victim, preemption.reason.value, preemption.cluster_queue, now
            )

    def _admitted(self, key: str, now: float) -> None:
        self.admissions += 1
        record = self.records[key]
        if record.first_admitted is None:
            record.first_admitted = now

    def _started(self, workload: Workload, now: float) -> None:
        generation = self._generation.get(workload.key, 0) + 1
        self._generation[workload.key] = generation
        self._run_started[workload.key] = now
        remaining = max(0.0, (workload.runtime or 0.0) - workload.work_done)
        if math.isfinite(remaining):  # a workload that runs forever never finishes
            self._push(now + remaining, FINISH, (workload.key, generation))

    def _preempted(self, key: str, reason: str, queue: str, now: float) -> None:
        workload = self.scheduler.workloads[key]
        record = self.records[key]
        record.preemptions += 1
        record.preemptions_by_reason[reason] = record.preemptions_by_reason.get(reason, 0) + 1
        self.preemptions_by_reason[reason] = self.preemptions_by_reason.get(reason, 0) + 1
        by_queue = self.preemptions_by_queue[queue]
        by_queue[reason] = by_queue.get(reason, 0) + 1
        if self.scheduler.defer_release:
            self._push(now + self.eviction_delay, RELEASE, key)
        started = self._run_started.pop(key, None)
        self._generation[key] = self._generation.get(key, 0) + 1  # cancel its completion
        if started is None:
            return
        progress = workload.work_done + (now - started)
        interval = workload.checkpoint_interval
        saved = math.floor(progress / interval) * interval if interval else 0.0
        lost = progress - saved
        workload.work_done = saved
        record.lost_seconds += lost
        record.lost_gpu_seconds += lost * record.gpus

    # --------------------------------------------------------------- metrics

    def _integrate(self, now: float) -> None:
        """Accumulate resource-seconds since the last event, and sample."""
        dt = now - self._last_integral
        if dt > 0:
            tree = self.scheduler.tree
            for name, node in tree.queues.items():
                totals = self.totals[name]
                for fr, used in node.usage.items():
                    if not used:
                        continue
                    totals.used[fr] = totals.used.get(fr, 0.0) + used * dt
                    over = used - node.nominal(fr)
                    if over > 0:
                        totals.borrowed[fr] = totals.borrowed.get(fr, 0.0) + over * dt
            for root in tree.roots:
                if root.is_cohort:
                    self._integrate_lending(root, dt)
            self._last_integral = now
        self._sample(now)

    def _integrate_lending(self, root: Node, dt: float) -> None:
        """Attribute what borrowers use to the queues with unused quota, in
        proportion to how much each leaves unused (Kueue does not say who lent)."""
        queues = list(root.queues())
        borrowed: dict[FlavorResource, int] = {}
        idle: dict[FlavorResource, dict[str, int]] = {}
        for node in queues:
            for fr in node.quotas:
                used = node.usage.get(fr, 0)
                nominal = node.nominal(fr)
                if used > nominal:
                    borrowed[fr] = borrowed.get(fr, 0) + used - nominal
                elif nominal > used:
                    spare = min(nominal - used, node.lendable(fr))
                    if spare > 0:
                        idle.setdefault(fr, {})[node.name] = spare
        for fr, amount in borrowed.items():
            lenders = idle.get(fr, {})
            total = sum(lenders.values())
            if not total:
                continue
            for name, spare in lenders.items():
                share = min(amount, total) * spare / total
                lent = self.totals[name].lent
                lent[fr] = lent.get(fr, 0.0) + share * dt

    def _sample(self, now: float, force: bool = False) -> None:
        if now < self._next_sample and not force:
            return
        self._next_sample = now + self._sample_every
        scale = 1000 if self.main_resource == "cpu" else 1  # milli-CPU to cores
        self.series["t"].append(now)
        for name, node in self.scheduler.tree.queues.items():
            used = borrowed = 0
            for fr, amount in node.usage.items():
                if fr[1] == self.main_resource:
                    used += amount
                    borrowed += max(0, amount - node.nominal(fr))
            self.series["usage"].setdefault(name, []).append(used / scale)
            self.series["borrowed"].setdefault(name, []).append(borrowed / scale)
            self.series["pending"].setdefault(name, []).append(len(self.scheduler.queues[name]))
