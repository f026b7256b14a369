"""The scheduler: cluster state plus Kueue's scheduling cycle.

One cycle takes the head of every active ClusterQueue, assigns flavors against
the usage at the start of the cycle, orders the entries (classic: not borrowing
first, then priority, then queue-order time; fair sharing: a tournament on
dominant resource share), and processes them one by one against the usage as
it changes: fit → quota reserved (admitted once every admission check is
Ready); preemption needed with victims → victims evicted, the preemptor waits
for the next cycle; otherwise the head goes back to its queue (StrictFIFO:
still the head; BestEffortFIFO: parked until capacity may have changed).

Deliberate simplifications, documented in the README: no partial admission, no
topology-aware scheduling, no flavor-scan resumption across cycles, evictions
release quota at the end of the cycle that issued them, and ties Kueue leaves to
Go's map order are broken by name.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from queues.engine import partial
from queues.engine.admission_fairness import UsageLedger, local_queue_of
from queues.engine.assign import Assignment, FlavorAssigner, Mode
from queues.engine.fair_order import fair_order
from queues.engine.model import (
    CheckState,
    ClusterQueue,
    FlavorResource,
    Policy,
    ReclaimWithinCohort,
    StopPolicy,
    Workload,
)
from queues.engine.outcomes import CycleResult, Entry, Pending, Preemption
from queues.engine.placement import fits_on_nodes, place_on_nodes, placer_for
from queues.engine.preemption import REASON_TEXT, Preemptor, Target
from queues.engine.queueing import PendingQueue
from queues.engine.quota import QuotaTree


class Scheduler:
    """Cluster state and the cycle. Times are seconds on the caller's clock."""

    def __init__(
        self, policy: Policy, workloads: Iterable[Workload] = (), now: float = 0.0
    ) -> None:
        self.policy = policy
        self.now = now
        self.tree = QuotaTree(policy)
        self.placer = placer_for(policy)
        self.workloads: dict[str, Workload] = {}
        self.reserved: dict[str, dict[str, Workload]] = {name: {} for name in policy.cluster_queues}
        self.usage_of: dict[str, dict[FlavorResource, int]] = {}
        fairness = policy.admission_fair_sharing
        self.ledger = UsageLedger(fairness, now) if fairness is not None else None
        self.queues = {
            name: PendingQueue(name, queue.queueing_strategy, self._ranking(queue))
            for name, queue in policy.cluster_queues.items()
        }
        self.status: dict[str, Pending] = {}
        self.cycles = 0
        self._cycle_holds: list[tuple[str, dict[FlavorResource, int]]] = []
        self._preemptors: dict[str, str] = {}
        self._oracle_targets: dict[tuple[str, FlavorResource, int], list[Target]] = {}
        # False: victims release their quota at the end of the cycle that evicted
        # them (no time passes). True: they keep it until release() is called.
        self.defer_release = False
        # Root cohort (or queue) names whose parked workloads should queue again.
        self._unpark_requests: set[str] = set()
        # Pending workloads waiting out a requeue backoff (Kueue's requeueAt):
        # not candidates until then.
        self.backing_off: dict[str, Workload] = {}
        # Admitted workloads whose pods are not all ready yet (waitForPodsReady).
        self.pods_not_ready: set[str] = set()
        for workload in workloads:
            self.add(workload)

    def _ranking(self, queue: ClusterQueue) -> Callable[[Workload], float] | None:
        ledger = self.ledger
        if ledger is None or queue.admission_mode != "UsageBasedAdmissionFairSharing":
            return None
        return lambda workload: ledger.usage(local_queue_of(workload))

    def sample_usage(self) -> None:
        """Admission fair sharing's periodic update of LocalQueue usage."""
        if self.ledger is not None:
            holding = (w for queue in self.reserved.values() for w in queue.values())
            self.ledger.sample(self.now, holding)

    # ---------------------------------------------------------------- state

    def add(self, workload: Workload) -> None:
        """A workload arrives: holding quota (a snapshot) or pending."""
        if workload.key in self.workloads:
            raise ValueError(f"workload {workload.key} already exists")
        self.workloads[workload.key] = workload
        if workload.admission is not None:
            self._hold(workload)
            if not workload.check_states:
                workload.check_states = self._pending_checks(workload)
        elif workload.active:
            if workload.queued_at is None:
                workload.queued_at = workload.creation_time
            if self._enqueue(workload):
                queue = self.policy.cluster_queues[workload.cluster_queue]
                self.status[workload.key] = (
                    Pending("Queued", self._queued_message(workload))
                    if self._active(queue)
                    else Pending("Suspended", f"ClusterQueue {queue.name} is inactive")
                )

    def _enqueue(self, workload: Workload) -> bool:
        """Into its queue, or set aside until its requeue time. True if queued."""
        if workload.requeue_at is not None and workload.requeue_at > self.now:
            self.backing_off[workload.key] = workload
            self.status[workload.key] = Pending(
                "Pending", f"Waiting out a requeue backoff until t={workload.requeue_at:g}s"
            )
            return False
        self.queues[workload.cluster_queue].push(workload)
        return True

    def release_backoffs(self) -> int:
        """Queue the workloads whose requeue time has come."""
        due = [w for w in self.backing_off.values() if (w.requeue_at or 0.0) <= self.now]
        for workload in due:
            del self.backing_off[workload.key]
            self.queues[workload.cluster_queue].push(workload)
            self.status[workload.key] = Pending("Queued", self._queued_message(workload))
        return len(due)

    def _hold(self, workload: Workload) -> None:
        usage = workload.usage()
        self.usage_of[workload.key] = usage
        self.reserved[workload.cluster_queue][workload.key] = workload
        self.tree.add(workload.cluster_queue, usage)
        self.status.pop(workload.key, None)
        if self.placer is not None:
            place_on_nodes(self.placer, workload)

    def _release(self, workload: Workload) -> None:
        usage = self.usage_of.pop(workload.key, {})
        self.reserved[workload.cluster_queue].pop(workload.key, None)
        self.tree.remove(workload.cluster_queue, usage)
        if self.placer is not None:
            self.placer.release(workload.key)
        workload.admission = None
        workload.admitted_counts = None
        workload.admitted_at = None
        workload.evicting = False
        self._request_unpark(workload.cluster_queue)

    def _request_unpark(self, queue: str) -> None:
        self._unpark_requests.add(self.tree.queues[queue].root().name)

    def apply_unpark_requests(self) -> int:
        """Queue again every parked workload in trees where capacity may have
        been freed (Kueue does this about a second after the event)."""
        moved = 0
        roots, self._unpark_requests = self._unpark_requests, set()
        for name, node in self.tree.queues.items():
            if node.root().name in roots:
                moved += self.queues[name].unpark()
        return moved

    @property
    def has_unpark_requests(self) -> bool:
        return bool(self._unpark_requests)

    def finish(self, key: str) -> Workload:
        """The workload's job ended: it releases its quota and leaves."""
        workload = self.workloads.pop(key)
        if workload.admission is not None:
            self._release(workload)
        self.queues[workload.cluster_queue].remove(key)
        self.backing_off.pop(key, None)
        self.pods_not_ready.discard(key)
        self.status.pop(key, None)
        return workload

    def evict(self, key: str, *, requeue_at: float | None = None) -> Workload:
        """Release quota and queue again; by default it keeps its place (Kueue
        orders a preempted workload by its creation time)."""
        workload = self.workloads[key]
        if workload.admission is not None:
            self._release(workload)
        workload.evictions += 1
        workload.check_states = {}
        self.pods_not_ready.discard(key)
        if requeue_at is not None:
            workload.queued_at = requeue_at
        if workload.active:
            self._enqueue(workload)
        return workload

    def pods_ready_timeout(self, key: str) -> bool:
        """Its pods were not all ready in time (Kueue's waitForPodsReady): evicted
        and requeued after a backoff, or, past the requeue limit, deactivated.
        Returns True when deactivated."""
        config = self.policy.wait_for_pods_ready
        assert config is not None
        workload = self.workloads[key]
        count = workload.requeue_count + 1
        if config.backoff_limit is not None and count > config.backoff_limit:
            self._release(workload)
            self.pods_not_ready.discard(key)
            workload.active = False
            workload.check_states = {}
            self.status[key] = Pending(
                "Deactivated",
                "The workload is deactivated due to exceeding the maximum number of "
                "re-queuing retries (RequeuingLimitExceeded)",
            )
            return True
        workload.requeue_count = count
        workload.requeue_at = self.now + config.backoff(count)
        self.evict(
            key, requeue_at=self.now if config.timestamp == "Eviction" else workload.creation_time
        )
        if workload.key in self.backing_off:
            self.status[key] = Pending(
                "Pending",
                f"Exceeded the PodsReady timeout; requeued after a backoff until "
                f"t={workload.requeue_at:g}s (requeue {count})",
            )
        return False

    def release(self, key: str) -> Workload:
        """A preempted workload's job has stopped: free its quota, queue it again."""
        workload = self.workloads[key]
        workload.evictions -= 1  # counted when the eviction started
        return self.evict(key)

    def set_check(self, key: str, check: str, state: CheckState) -> None:
        """An admission check controller answered (Kueue's workload controller)."""
        workload = self.workloads[key]
        if workload.admission is None or check not in workload.check_states:
            raise ValueError(f"{key} has no admission check {check!r} to update")
        workload.check_states[check] = state
        self.reconcile_checks(key)

    def reconcile_checks(self, key: str) -> None:
        """Retry: release quota and queue again, ordered by the eviction time.
        Rejected: release quota and deactivate. Ready everywhere: admitted."""
        workload = self.workloads[key]
        states = workload.check_states.values()
        if CheckState.REJECTED in states:
            rejected = sorted(
                n for n, s in workload.check_states.items() if s is CheckState.REJECTED
            )
            self._release(workload)
            workload.active = False
            workload.check_states = {}
            self.status[key] = Pending(
                "Deactivated",
                "The workload is deactivated due to AdmissionCheck in Rejected state: "
                + "; ".join(f'"{n}"' for n in rejected),
            )
        elif CheckState.RETRY in states:
            retry = sorted(n for n, s in workload.check_states.items() if s is CheckState.RETRY)
            wait = max((workload.check_retry_after.get(n, 0.0) for n in retry), default=0.0)
            if wait > 0:  # Kueue's requeueAt: not queued again before then
                workload.requeue_at = max(workload.requeue_at or 0.0, self.now + wait)
            workload.check_retry_after = {}
            self.evict(key, requeue_at=self.now)
            self.status[key] = Pending(
                "Pending",
                f"Evicted due to AdmissionCheck{'s' if len(retry) > 1 else ''} in Retry state: "
                + "; ".join(f'"{n}"' for n in retry),
            )

    def _pending_checks(self, workload: Workload) -> dict[str, CheckState]:
        queue = self.policy.cluster_queues[workload.cluster_queue]
        used = {
            flavor for flavors in (workload.admission or {}).values() for flavor in flavors.values()
        }
        return {
            name: CheckState.PENDING
            for name, on_flavors in queue.admission_checks.items()
            if not on_flavors or used & set(on_flavors)
        }

    # ---------------------------------------------------------------- cycle

    def _active(self, queue: ClusterQueue) -> bool:
        return queue.stop_policy is StopPolicy.NONE

    def preemptor_for(self, exclude: set[str]) -> Preemptor:
        return Preemptor(self.policy, self.tree, self.reserved, self.usage_of, exclude, self.now)

    def assign(self, workload: Workload, exclude: set[str] | None = None) -> Assignment:
        """Flavor assignment for a pending workload against current usage."""
        queue = self.policy.cluster_queues[workload.cluster_queue]
        node = self.tree.queues[queue.name]
        preemptor = self.preemptor_for(exclude or set())

        self._oracle_targets = {}

        def oracle(wl: Workload, fr: FlavorResource, amount: int) -> tuple[Mode, int]:
            targets = preemptor.targets(wl, queue, {fr}, {fr: amount})
            if not exclude:
                # The same search _nominate runs next for a one-resource request,
                # against the same usage: kept so it runs once.
                self._oracle_targets[(wl.key, fr, amount)] = targets
            if not targets:
                return Mode.NO_CANDIDATES, node.borrowing_level(fr, amount)[0]
            for target in targets:
                self.tree.remove(target.workload.cluster_queue, self.usage_of[target.workload.key])
            try:
                borrow = node.borrowing_level(fr, amount)[0]
            finally:
                for target in targets:
                    self.tree.add(target.workload.cluster_queue, self.usage_of[target.workload.key])
            in_queue = any(t.workload.cluster_queue == queue.name for t in targets)
            return (Mode.PREEMPT if in_queue else Mode.RECLAIM), borrow

        return FlavorAssigner(self.policy, queue, node, oracle, self.placer).assign(workload)

    def apply_stop_policies(self) -> list[str]:
        """A stopped ClusterQueue (Kueue's workload controller): HoldAndDrain evicts
        everything holding quota there; Hold evicts only reservations still
        waiting for admission checks. Returns the evicted workloads."""
        evicted: list[str] = []
        for name, queue in self.policy.cluster_queues.items():
            if self._active(queue):
                continue
            drain = queue.stop_policy is StopPolicy.HOLD_AND_DRAIN
            for key, workload in list(self.reserved[name].items()):
                if drain or not workload.is_admitted:
                    self.evict(key)
                    self.status[key] = Pending("Suspended", f"ClusterQueue {name} is inactive")
                    evicted.append(key)
        return evicted

    def cycle(self, now: float | None = None) -> CycleResult:
        """One scheduling cycle."""
        if now is not None:
            self.now = now
        self.cycles += 1
        self.apply_stop_policies()
        if self.backing_off:
            self.release_backoffs()
        result = CycleResult()
        config = self.policy.wait_for_pods_ready
        if config is not None and config.block_admission and self.pods_not_ready:
            # Kueue admits nothing more until every admitted workload's pods are ready.
            return result
        heads: list[Entry] = []
        for name in sorted(self.queues):
            queue = self.policy.cluster_queues[name]
            if not self._active(queue):
                continue
            workload = self.queues[name].pop()
            if workload is not None:
                heads.append(self._nominate(workload, queue))
        admitted_now: set[str] = set()
        victims: dict[str, Target] = {}
        # Usage that stands only for this cycle: preemptors waiting for their
        # victims, and heads holding capacity they cannot get yet.
        self._cycle_holds = []
        self._preemptors = {}
        for entry in self._ordered(heads):
            self._process(entry, victims, admitted_now, result)
        for queue_name, usage in self._cycle_holds:
            self.tree.remove(queue_name, usage)
        for target in victims.values():
            self._preempt(target, result)
        return result

    def _nominate(self, workload: Workload, queue: ClusterQueue) -> Entry:
        if any(
            s in (CheckState.RETRY, CheckState.REJECTED) for s in workload.check_states.values()
        ):
            return Entry(
                workload,
                queue,
                None,
                pending=Pending("PendingEvaluation", "The workload has failed admission checks"),
            )
        assignment = self.assign(workload)
        entry = Entry(workload, queue, assignment)
        if assignment.needs_preemption:
            # Kueue searches victims with the workload's own requests: no zero
            # amounts, and no implicit pods count (it only re-checks pods when the
            # entry is processed).
            requests = {
                fr: amount for fr, amount in assignment.usage.items() if amount and fr[1] != "pods"
            }
            searched = None
            if len(requests) == 1 and set(requests) == assignment.contested:
                ((fr, amount),) = requests.items()
                searched = self._oracle_targets.get((workload.key, fr, amount))
            entry.targets = (
                searched
                if searched is not None
                else self.preemptor_for(set()).targets(
                    workload, queue, assignment.contested, requests
                )
            )
        if entry.targets and not fits_on_nodes(
            self.placer, workload, assignment, {t.workload.key for t in entry.targets}
        ):
            # The victims the quota asks for would not free room where the pods
            # must go: preempting them would only churn.
            entry.targets = []
        if not assignment.fits and not entry.targets and workload.can_be_partially_admitted:
            fewer = partial.search(workload, lambda counts: self._try_counts(workload, counts))
            if fewer is not None:
                entry.assignment, entry.targets = fewer
        return entry

    def _try_counts(
        self, workload: Workload, counts: dict[str, int]
    ) -> tuple[Assignment, list[Target]] | None:
        """Partial admission's test of one step: fits, or can preempt for it."""
        smaller = partial.reduced(workload, counts)
        queue = self.policy.cluster_queues[workload.cluster_queue]
        assignment = self.assign(smaller)
        assignment.counts = counts
        if assignment.fits:
            return assignment, []
        if assignment.needs_preemption:
            requests = {
                fr: amount for fr, amount in assignment.usage.items() if amount and fr[1] != "pods"
            }
            targets = self.preemptor_for(set()).targets(
                smaller, queue, assignment.contested, requests
            )
            if targets:
                return assignment, targets
        return None

    def _ordered(self, entries: list[Entry]) -> Iterator[Entry]:
        if self.policy.fair_sharing:
            yield from fair_order(self.tree, entries)
            return
        yield from sorted(
            entries,
            key=lambda e: (
                e.assignment.borrowing if e.assignment else 0,
                -e.workload.priority,
                e.workload.queue_order_time,
                e.workload.key,
            ),
        )

    def _process(
        self, entry: Entry, victims: dict[str, Target], admitted_now: set[str], result: CycleResult
    ) -> None:
        workload, queue = entry.workload, entry.queue
        pending_queue = self.queues[queue.name]
        if entry.pending is not None:
            self._leave_pending(entry, entry.pending, "Inadmissible", result)
            return
        assignment = entry.assignment
        assert assignment is not None
        if assignment.mode is Mode.NO_FIT:
            self._leave_pending(
                entry,
                Pending(self._no_fit_reason(assignment), assignment.message()),
                "NoFit",
                result,
            )
            return
        if assignment.needs_preemption and not entry.targets:
            if queue.preemption.reclaim_within_cohort is not ReclaimWithinCohort.ANY:
                self._hold_capacity(entry)
            self._leave_pending(
                entry,
                Pending("WaitingForQuota", assignment.message()),
                "PreemptionNoCandidates",
                result,
            )
            return
        if any(t.workload.key in victims for t in entry.targets):
            self._leave_pending(
                entry,
                Pending(
                    "WaitingForQuota",
                    "Workload has overlapping preemption targets with another workload",
                ),
                "FailedAfterNomination",
                result,
            )
            return
        if not self._fits_without(
            queue.name, assignment.usage, [*victims.values(), *entry.targets]
        ) or (assignment.fits and not fits_on_nodes(self.placer, workload, assignment)):
            self._leave_pending(
                entry,
                Pending(
                    "WaitingForQuota", "Workload no longer fits after processing another workload"
                ),
                "FailedAfterNomination",
                result,
            )
            return
        for target in entry.targets:
            victims[target.workload.key] = target
            self._preemptors[target.workload.key] = workload.key
        if assignment.needs_preemption:
            self.tree.add(queue.name, assignment.usage)
            self._cycle_holds.append((queue.name, assignment.usage))
            count = len(entry.targets)
            self._leave_pending(
                entry,
                Pending(
                    "WaitingForPreemptedWorkloads",
                    f"{assignment.message()}. Pending the preemption of {count} workload(s)",
                ),
                "PendingPreemption",
                result,
            )
            return
        workload.admission = assignment.flavors()
        workload.admitted_counts = assignment.counts
        workload.admitted_at = self.now
        # Ordered by its creation time again (an AdmissionCheck eviction's time
        # only counts while it waits to be admitted again).
        workload.queued_at = workload.creation_time
        self._hold(workload)
        if self.ledger is not None and self.queues[queue.name].ranking is not None:
            self.ledger.admitted(workload)
        admitted_now.add(workload.key)
        pending_queue.remove(workload.key)
        workload.check_states = self._pending_checks(workload)
        if workload.check_states:
            result.reserved[workload.key] = workload.admission
        else:
            result.admitted[workload.key] = workload.admission

    def _leave_pending(
        self, entry: Entry, pending: Pending, requeue_reason: str, result: CycleResult
    ) -> None:
        self.status[entry.workload.key] = pending
        result.evaluated[entry.workload.key] = pending
        self.queues[entry.queue.name].requeue(entry.workload, requeue_reason)

    def _hold_capacity(self, entry: Entry) -> None:
        """A head that would need preemption but has no victims keeps later
        entries from taking the capacity it is waiting for, for this cycle."""
        assert entry.assignment is not None
        node = self.tree.queues[entry.queue.name]
        hold: dict[FlavorResource, int] = {}
        for fr, amount in entry.assignment.usage.items():
            used = node.usage.get(fr, 0)
            if entry.assignment.borrowing > 0:
                limit = node.borrowing_limit(fr)
                hold[fr] = (
                    amount
                    if limit is None
                    else max(0, min(amount, node.nominal(fr) + limit - used))
                )
            else:
                hold[fr] = max(0, min(amount, node.nominal(fr) - used))
        self.tree.add(entry.queue.name, hold)
        self._cycle_holds.append((entry.queue.name, hold))

    def _fits_without(
        self, queue: str, usage: dict[FlavorResource, int], removed: list[Target]
    ) -> bool:
        unique = {t.workload.key: t for t in removed}.values()
        for target in unique:
            self.tree.remove(target.workload.cluster_queue, self.usage_of[target.workload.key])
        try:
            return self.tree.fits(queue, usage)
        finally:
            for target in unique:
                self.tree.add(target.workload.cluster_queue, self.usage_of[target.workload.key])

    def _preempt(self, target: Target, result: CycleResult) -> None:
        victim = target.workload
        preemptor_key = self._preemptors.pop(victim.key, "")
        if victim.evicting:
            return  # already on its way out: Kueue counts it, writes nothing new
        preemptor = self.workloads.get(preemptor_key)
        preemptor_path = self.tree.queues[preemptor.cluster_queue].path() if preemptor else ""
        message = (
            f"Preempted to accommodate a workload ({preemptor_key}) due to "
            f"{REASON_TEXT[target.reason]}; preemptor path: {preemptor_path}; preemptee path: "
            f"{self.tree.queues[victim.cluster_queue].path()}"
        )
        if self.defer_release:
            # Its job is stopping: it keeps its quota until release() (Kueue frees
            # it when the pods have gone).
            victim.evicting = True
            victim.evictions += 1
        else:
            self.evict(victim.key)
        self.status[victim.key] = Pending("Preempted", message)
        result.preempted.append(
            Preemption(victim.key, preemptor_key, target.reason, victim.cluster_queue, message)
        )

    @staticmethod
    def _no_fit_reason(assignment: Assignment) -> str:
        """Kueue's granular reason: within each resource group tried, the least
        severe cause among its unusable flavors; across groups, the most severe."""
        failing = next(p for p in assignment.pod_sets if p.mode is Mode.NO_FIT)
        severity = {"WaitingForQuota": 0, "ExceedsMaxQuota": 1, "NoMatchingFlavor": 2}
        per_group = [
            min(causes.values(), key=severity.__getitem__) for causes in failing.attempts if causes
        ]
        return max(per_group, key=severity.__getitem__, default="NoMatchingFlavor")

    def _queued_message(self, workload: Workload) -> str:
        return f"Waiting in ClusterQueue {workload.cluster_queue}"
