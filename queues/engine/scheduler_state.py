"""The scheduler's state between cycles and every change to it there: workloads
arriving (pending, or holding quota as a snapshot), finishing, evicted and
requeued, waiting out a backoff, answered by their admission checks or out of
time for their pods to be ready, stopped queues drained, and parked workloads
queued again once capacity may have freed. Kueue's workload controller's part;
the scheduling cycle, which reads and changes the same state, is in
``queues.engine.scheduler``.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mypy_extensions import mypyc_attr

from queues.engine.admission_fairness import UsageLedger, local_queue_of
from queues.engine.groups import independent_groups, node_sharers
from queues.engine.model import (
    CheckState,
    ClusterQueue,
    FlavorResource,
    Policy,
    StopPolicy,
    Workload,
)
from queues.engine.outcomes import Pending
from queues.engine.placement import place_on_nodes, placer_for
from queues.engine.queueing import PendingQueue, QueueBoard, forget, last_put
from queues.engine.quota import QuotaTree


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class LedgerRanking:
    """A queue's first sort key under admission fair sharing: the usage of
    the workload's LocalQueue. An object holding the ledger, not a closure,
    so that a copy of the scheduler (a rehearsal's, a replay's sent to a
    worker) ranks by its own ledger, and pickles."""

    def __init__(self, ledger: UsageLedger) -> None:
        self.ledger = ledger

    def __call__(self, workload: Workload) -> float:
        return self.ledger.usage(local_queue_of(workload))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QueueSlot:
    """A ClusterQueue as a cycle visits it: its pending queue, its policy,
    its cohort tree's root and whether it is stopped, all fixed while the
    scheduler lives (policies are frozen). One lookup by name where a
    cycle made four, for each of the dozens of queues it walks."""

    def __init__(
        self, pending: PendingQueue, queue: ClusterQueue, root: str, stopped: bool
    ) -> None:
        self.pending = pending
        self.queue = queue
        self.root = root
        self.stopped = stopped


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class SchedulerState:
    """Cluster state, and how it changes outside the cycle. Times are seconds on
    the caller's clock."""

    def __init__(
        self, policy: Policy, workloads: Iterable[Workload] = (), now: float = 0.0
    ) -> None:
        self.policy = policy
        self.now = now
        self.tree = QuotaTree(policy)
        self.placer = placer_for(policy)
        self.workloads: dict[str, Workload] = {}
        self.reserved: dict[str, dict[str, Workload]] = {name: {} for name in policy.cluster_queues}
        # Per ClusterQueue, how many of the workloads holding quota there have
        # each priority: a victim search within the queue that may take only
        # lower priorities knows at once when none is (Preemptor._none_lower).
        self.reserved_priorities: dict[str, dict[int, int]] = {
            name: {} for name in policy.cluster_queues
        }
        # Per ClusterQueue, whether ``reserved`` holds its workloads in the
        # order of their admission times (each held stamped, at or after the
        # one before it), and those of them being evicted: a victim search
        # then reads its first candidates from the newest end
        # (FirstCandidates.first_held) and the few evicting, rather than
        # sorting them all. A queue that empties is in order again.
        self.held_in_order: dict[str, bool] = dict.fromkeys(policy.cluster_queues, True)
        self.evicting_held: dict[str, dict[str, Workload]] = {
            name: {} for name in policy.cluster_queues
        }
        self.usage_of: dict[str, dict[FlavorResource, int]] = {}
        fairness = policy.admission_fair_sharing
        self.ledger = UsageLedger(fairness, now) if fairness is not None else None
        self._root_of = {name: node.root().name for name, node in self.tree.queues.items()}
        # The independent group of each queue and of each root (queues.engine.groups).
        self.group_of = independent_groups(policy, self.tree)
        self.group_of_root = {self._root_of[name]: g for name, g in self.group_of.items()}
        # Each group's roots, for what a cycle in some groups looks at there.
        self.roots_in: dict[str, tuple[str, ...]] = {}
        for root, group in sorted(self.group_of_root.items()):
            self.roots_in[group] = (*self.roots_in.get(group, ()), root)
        self.queues_in: dict[str, int] = {}
        for group in self.group_of.values():
            self.queues_in[group] = self.queues_in.get(group, 0) + 1
        # Workloads the scheduler holds (pending or holding quota), per group.
        self.workloads_in = dict.fromkeys(self.queues_in, 0)
        self.board = QueueBoard(self._root_of, self.group_of)
        self.queues = {
            name: PendingQueue(name, queue.queueing_strategy, self._ranking(queue), self.board)
            for name, queue in policy.cluster_queues.items()
        }
        # Per cohort tree, a count of the changes that can change a head's
        # nomination there: quota taken or given back, a victim marked evicting.
        # A head nominated again with its tree's count unchanged gets the same
        # answer (see NominationMemory._nomination), as it would from Kueue.
        self.tree_versions = dict.fromkeys(self._root_of.values(), 0)
        # The same count per ClusterQueue, for its own changes only: a head whose
        # nomination read nothing of its tree but its own queue and some quota
        # figures may be reused across changes elsewhere (NominationMemory._nomination).
        self.queue_versions = dict.fromkeys(policy.cluster_queues, 0)
        # Cohort trees share no quota but may share nodes: per topology-aware
        # flavor, the trees with a queue that can use it. What one places on
        # those nodes changes what fits for the others.
        self._node_sharers = (
            node_sharers(policy, self._root_of, self.placer.handles)
            if self.placer is not None
            else {}
        )
        # Holding quota without an admission time: victim search orders them by
        # the clock, so no nomination is reused while there are any.
        self.unstamped: set[str] = set()
        # Policies are frozen: the stopped queues are known once.
        self._stopped = [
            name for name, queue in policy.cluster_queues.items() if not self._active(queue)
        ]
        self.slots = {
            name: QueueSlot(self.queues[name], queue, self._root_of[name], name in self._stopped)
            for name, queue in policy.cluster_queues.items()
        }
        self.status: dict[str, Pending] = {}
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
        return LedgerRanking(ledger)

    def sample_usage(self) -> None:
        """Admission fair sharing's periodic update of LocalQueue usage."""
        if self.ledger is not None:
            holding = (w for queue in self.reserved.values() for w in queue.values())
            self.ledger.sample(self.now, holding)

    def add(self, workload: Workload) -> None:
        """A workload arrives: holding quota (a snapshot) or pending."""
        if workload.key in self.workloads:
            raise ValueError(f"workload {workload.key} already exists")
        self.workloads[workload.key] = workload
        self.workloads_in[self.group_of[workload.cluster_queue]] += 1
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

    def release_backoffs(self, groups: set[str] | None = None) -> int:
        """Queue the workloads whose requeue time has come (in ``groups``)."""
        due = [
            w
            for w in self.backing_off.values()
            if (w.requeue_at or 0.0) <= self.now
            and (groups is None or self.group_of[w.cluster_queue] in groups)
        ]
        for workload in due:
            del self.backing_off[workload.key]
            self.queues[workload.cluster_queue].push(workload)
            self.status[workload.key] = Pending("Queued", self._queued_message(workload))
        return len(due)

    def changed_tree(self, queue: str) -> None:
        self.tree_versions[self._root_of[queue]] += 1
        self.queue_versions[queue] += 1

    def _trees_affected(self, workload: Workload) -> set[str]:
        """The trees whose heads may fit differently once the workload takes or
        gives back its quota: its own, and those sharing the nodes it is on."""
        roots = {self._root_of[workload.cluster_queue]}
        if self._node_sharers:
            for flavors in (workload.admission or {}).values():
                for flavor in flavors.values():
                    roots |= self._node_sharers.get(flavor, set())
        return roots

    def _hold(self, workload: Workload, usage: dict[FlavorResource, int] | None = None) -> None:
        """Its quota held; ``usage`` is what it holds (``Workload.usage``),
        if already worked out."""
        for root in self._trees_affected(workload):
            self.tree_versions[root] += 1
        self.queue_versions[workload.cluster_queue] += 1
        if workload.admitted_at is None:
            self.unstamped.add(workload.key)
        if usage is None:
            usage = workload.usage()
        self.usage_of[workload.key] = usage
        name = workload.cluster_queue
        held = self.reserved[name]
        if workload.key not in held:
            counts = self.reserved_priorities[name]
            counts[workload.priority] = counts.get(workload.priority, 0) + 1
            if self.held_in_order[name]:
                # In order, the newest held is the last one held.
                at = workload.admitted_at
                newest = last_put(held).admitted_at if held else at
                if at is None or newest is None or at < newest:
                    self.held_in_order[name] = False
            if workload.evicting:
                self.evicting_held[name][workload.key] = workload
        else:
            self.held_in_order[name] = False  # its place in the order may be wrong
        held[workload.key] = workload
        self.tree.add(workload.cluster_queue, usage)
        forget(self.status, workload.key)
        if self.placer is not None:
            place_on_nodes(self.placer, workload)

    def _release(self, workload: Workload) -> None:
        # Kueue queues again the inadmissible workloads of the cohort, and, when
        # nodes of a topology-aware flavor free up, of every queue using it.
        affected = self._trees_affected(workload)
        for root in affected:
            self.tree_versions[root] += 1
        self.queue_versions[workload.cluster_queue] += 1
        self._unpark_requests |= affected
        self.unstamped.discard(workload.key)
        usage = self.usage_of.get(workload.key)
        if usage is None:
            usage = {}
        else:
            del self.usage_of[workload.key]
        name = workload.cluster_queue
        holding = self.reserved[name]
        held = holding.get(workload.key)
        if held is not None:
            del holding[workload.key]
            counts = self.reserved_priorities[name]
            left = counts[held.priority] - 1
            if left:
                counts[held.priority] = left
            else:
                del counts[held.priority]
            forget(self.evicting_held[name], workload.key)
            if not holding:
                self.held_in_order[name] = True
        self.tree.remove(workload.cluster_queue, usage)
        if self.placer is not None:
            self.placer.release(workload.key)
        workload.admission = None
        workload.admitted_counts = None
        workload.admitted_at = None
        workload.evicting = False

    def apply_unpark_requests(self, groups: set[str] | None = None) -> int:
        """Queue again every parked workload in trees where capacity may have
        been freed (Kueue does this about a second after the event); only in
        ``groups`` when given."""
        if groups is None:
            roots, self._unpark_requests = self._unpark_requests, set()
        else:
            roots = self.take_unpark_requests(groups)
        return self.unpark_roots(roots)

    def take_unpark_requests(self, groups: set[str]) -> set[str]:
        """The roots of ``groups`` whose parked work asks to queue again; they
        no longer ask (``unpark_roots`` answers them)."""
        roots = {r for r in self._unpark_requests if self.group_of_root[r] in groups}
        self._unpark_requests -= roots
        return roots

    def unpark_roots(self, roots: set[str]) -> int:
        """Every parked workload in those trees queued again."""
        if not roots:
            return 0
        moved = 0
        # In name order, as ever.
        for name in self.board.parked_among(roots):
            moved += self.queues[name].unpark()
        return moved

    def has_parked_in(self, group: str | None = None) -> bool:
        """Any workload parked (in the group)."""
        if group is None:
            return any(self.queues[name].has_parked for name in self.board.parking)
        parking_in = self.board.parking_in
        return any(
            self.queues[name].has_parked
            for root in self.roots_in.get(group, ())
            for name in parking_in.get(root, ())
        )

    @property
    def has_parked(self) -> bool:
        """Any workload parked anywhere."""
        return self.has_parked_in()

    @property
    def has_unpark_requests(self) -> bool:
        return bool(self._unpark_requests)

    def groups_asking_to_unpark(self) -> set[str]:
        return {self.group_of_root[root] for root in self._unpark_requests}

    def roots_asking_to_unpark(self, group: str) -> tuple[str, ...]:
        """The roots of ``group`` whose parked work asks to queue again."""
        return tuple(root for root in self.roots_in[group] if root in self._unpark_requests)

    def finish(self, key: str) -> Workload:
        """The workload's job ended: it releases its quota and leaves."""
        workload = self.workloads[key]
        del self.workloads[key]
        self.workloads_in[self.group_of[workload.cluster_queue]] -= 1
        if workload.admission is not None:
            self._release(workload)
        self.queues[workload.cluster_queue].remove(key)
        forget(self.backing_off, key)
        self.pods_not_ready.discard(key)
        forget(self.status, key)
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
        if not queue.admission_checks:
            return {}  # most queues: asked at every admission
        used = {
            flavor for flavors in (workload.admission or {}).values() for flavor in flavors.values()
        }
        return {
            name: CheckState.PENDING
            for name, on_flavors in queue.admission_checks.items()
            if not on_flavors or used & set(on_flavors)
        }

    def _active(self, queue: ClusterQueue) -> bool:
        return queue.stop_policy is StopPolicy.NONE

    def apply_stop_policies(self) -> list[str]:
        """A stopped ClusterQueue (Kueue's workload controller): HoldAndDrain evicts
        everything holding quota there; Hold evicts only reservations still
        waiting for admission checks. Returns the evicted workloads."""
        evicted: list[str] = []
        for name in self._stopped:
            queue = self.policy.cluster_queues[name]
            drain = queue.stop_policy is StopPolicy.HOLD_AND_DRAIN
            for key, workload in list(self.reserved[name].items()):
                if drain or not workload.is_admitted:
                    self.evict(key)
                    self.status[key] = Pending("Suspended", f"ClusterQueue {name} is inactive")
                    evicted.append(key)
        return evicted

    def _queued_message(self, workload: Workload) -> str:
        return f"Waiting in ClusterQueue {workload.cluster_queue}"
