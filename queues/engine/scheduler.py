"""The scheduler: cluster state (``queues.engine.scheduler_state``), what it
remembers between cycles (``queues.engine.nomination_memory``), and Kueue's
scheduling cycle.

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

import functools
from collections.abc import Callable, Iterable
from typing import Final

from mypy_extensions import mypyc_attr

from queues.engine import partial
from queues.engine.assign import Assignment, FlavorAssigner, Mode
from queues.engine.fair_order import fair_order
from queues.engine.model import (
    CheckState,
    ClusterQueue,
    FlavorResource,
    Policy,
    ReclaimWithinCohort,
    Workload,
)
from queues.engine.nomination_memory import HopelessRead, NominationMemory
from queues.engine.outcomes import CycleResult, Entry, Pending, Preemption
from queues.engine.placement import fits_on_nodes
from queues.engine.preemption import Preemptor, hopeless_as_used
from queues.engine.queueing import forget
from queues.engine.standing_block import StandingBlock
from queues.engine.victim_search import REASON_TEXT, Target, usage_along
from queues.engine.witness import Witness

# How severe a reason a flavor could not be used is (_no_fit_reason).
_SEVERITY: Final = {"WaitingForQuota": 0, "ExceedsMaxQuota": 1, "NoMatchingFlavor": 2}


def _classic_order(entry: Entry) -> tuple[int, int, float, str]:
    """Kueue's classic order: not borrowing first, then priority, then time."""
    workload = entry.workload
    return (
        entry.assignment.borrowing if entry.assignment else 0,
        -workload.priority,
        workload.queue_order_time,
        workload.key,
    )


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Scheduler(NominationMemory):
    """Cluster state and the cycle. Times are seconds on the caller's clock."""

    def __init__(
        self, policy: Policy, workloads: Iterable[Workload] = (), now: float = 0.0
    ) -> None:
        self.cycles = 0
        self._cycle_holds: list[tuple[str, dict[FlavorResource, int]]] = []
        self._preemptors: dict[str, str] = {}
        self._oracle_targets: dict[tuple[str, FlavorResource, int], list[Target]] = {}
        # False: victim searches never stop early at the borrowing limit
        # (Preemptor._beyond_borrowing_limit; what that shortcut is checked against).
        self.stop_at_borrowing_limit = True
        # False: victim searches sort every candidate before their first steps,
        # never reading the first few in order from the newest held
        # (FirstCandidates.first_held; what that shortcut is checked against).
        self.first_held_in_order = True
        # Classic searches whose first steps were read that way and found
        # their victims (the others are then gathered and sorted in full).
        self.found_in_order = 0
        # Victim searches that shortcut ended without a walk (every search the
        # scheduler ran: explanations and check_reuse's included; not a reused
        # answer's searches asked again by still_without_victims).
        self.hopeless = 0
        # False: victims release their quota at the end of the cycle that evicted
        # them (no time passes). True: they keep it until release() is called.
        self.defer_release = False
        # Given each entry the cycle processes and what processes it, to call
        # (a rehearsal watches what each entry takes). A hook: compiled
        # (mypyc), the cycle calls its methods directly, past any replacement.
        self.process_watch: Callable[[Entry, Callable[[], None]], None] | None = None
        super().__init__(policy, workloads, now)

    def finish(self, key: str) -> Workload:
        # Its last nomination goes with it: kept, it would hold the workload
        # (and its assignment) until the table is next cleared.
        forget(self._nominations, key)
        return super().finish(key)

    def preemptor_for(self, exclude: set[str]) -> Preemptor:
        preemptor = Preemptor(
            self.policy, self.tree, self.reserved, self.usage_of, exclude, self.now
        )
        preemptor.stop_at_borrowing_limit = self.stop_at_borrowing_limit
        preemptor.stop_when_hopeless = self.stop_when_hopeless
        preemptor.reserved_priorities = self.reserved_priorities
        if self.first_held_in_order:
            preemptor.held_in_order = self.held_in_order
            preemptor.evicting_held = self.evicting_held
        return preemptor

    def assign(self, workload: Workload, exclude: set[str] | None = None) -> Assignment:
        """Flavor assignment for a pending workload against current usage."""
        return self._assign_read(workload, exclude)[0]

    def _assign_read(
        self, workload: Workload, exclude: set[str] | None = None
    ) -> tuple[Assignment, Witness | None]:
        """The assignment, and what it read if that was only its own queue, the
        quota figures and the hopeless victim searches in ``Witness`` (None: it
        read more, or may have)."""
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

        assigner = FlavorAssigner(self.policy, queue, node, oracle, self.placer)
        assignment = assigner.assign(workload)
        self.hopeless += preemptor.hopeless
        self.found_in_order += preemptor.found_in_order
        if preemptor.looked_past_queue or self.placer is not None:
            return assignment, None
        return assignment, (
            self.queue_versions[queue.name],
            tuple(assigner.reads),
            tuple(preemptor.hopeless_reads),
        )

    def _still_without_victims(
        self, workload: Workload, queue: ClusterQueue, searches: tuple[HopelessRead, ...]
    ) -> tuple[HopelessRead, ...] | None:
        self.hopeless_asked_again += 1
        node = self.tree.queues[queue.name]
        if self.stop_when_hopeless and all(
            hopeless_as_used(node, workload, read) for read in searches
        ):
            self.hopeless_as_used += 1
            return searches
        preemptor = self.preemptor_for(set())
        if not all(preemptor.still_without_victims(workload, queue, read) for read in searches):
            return None
        # Each is hopeless against the usage now: what later usage is held to
        # (after a finish, the tree fills again from there).
        return tuple(
            (contested, usage, same, ordered_at, usage_along(node, usage))
            for contested, usage, same, ordered_at, _ in searches
        )

    def cycle(self, now: float | None = None, groups: set[str] | None = None) -> CycleResult:
        """One scheduling cycle; with ``groups``, one in each of those
        independent groups (``queues.engine.groups``) at once, counted as
        one cycle each, and nothing anywhere else."""
        if now is not None:
            self.now = now
        self.cycles += 1 if groups is None else len(groups)
        # What a cycle does before it looks at its queues must do nothing more
        # when done again at the same time: an event time's last cycle is
        # counted unrun after one that left its trees quiet (Settler.confirm_unasked).
        self.apply_stop_policies()
        if self.backing_off:
            self.release_backoffs(groups)
        result = CycleResult()
        config = self.policy.wait_for_pods_ready
        if config is not None and config.block_admission and self.pods_not_ready:
            # Kueue admits nothing more until every admitted workload's pods are ready.
            return result
        quiet = self._quiet_trees(groups)
        before: dict[str, tuple[int, int]] = {}
        heads: list[Entry] = []
        # StrictFIFO heads left where they were that only stay pending (_standing).
        standing: list[tuple[Entry, Pending]] = []
        leave_standing = self.process_watch is None and self._skipping_allowed()
        # Per tree met, the heads its cycles left standing, if they may be
        # told so again unasked (_standing_block).
        blocks: dict[str, StandingBlock | None] = {}
        if not leave_standing and self._blocks:
            self._blocks.clear()  # its heads are asked, not told, meanwhile
        # The tree of the queue before, and what the walk knows of it: most
        # groups are one tree, so it is looked up once per run of its queues
        # rather than once per queue (a cycle walks dozens).
        last_root: str | None = None
        tree_quiet = False
        tree_block: StandingBlock | None = None
        slots = self.slots
        for name in self.board.ready_among(groups):
            slot = slots[name]
            if slot.stopped:
                continue  # its tree is met only through the queues it cycles
            root = slot.root
            if root != last_root:
                last_root = root
                tree_quiet = root in quiet
                if not tree_quiet:
                    if root not in before:
                        before[root] = self._signature(root)
                        if leave_standing:
                            blocks[root] = self._standing_block(root)
                    tree_block = blocks.get(root)
            if tree_quiet:
                continue
            pending_queue = slot.pending
            resting = pending_queue.resting if leave_standing else None
            if resting is not None:
                block = tree_block
                if block is not None and not self._told_by_block(block, name, resting):
                    block = None
                if block is not None and not self.check_reuse:
                    block.kept.append(name)  # told with its block (_tell_kept)
                    continue
                entry = self._nomination(resting, slot.queue)
                told = self._standing(entry)
                if block is not None and told != block.told[resting.key]:
                    said = block.told[resting.key]
                    raise AssertionError(f"{resting.key}: told {told}, its block says {said}")
                if told is not None:
                    standing.append((entry, told))
                    self.left_standing += 1
                    continue
                popped = pending_queue.pop()
                assert popped is resting, (name, popped, resting)
                heads.append(self._to_process(entry))
                continue
            workload = pending_queue.pop()
            if workload is not None:
                heads.append(self._to_process(self._nomination(workload, slot.queue)))
        admitted_now: set[str] = set()
        victims: dict[str, Target] = {}
        # Usage that stands only for this cycle: preemptors waiting for their
        # victims, and heads holding capacity they cannot get yet.
        self._cycle_holds = []
        self._preemptors = {}
        for entry in self._ordered(heads):
            if self.process_watch is None:
                self._process(entry, victims, admitted_now, result)
            else:
                self.process_watch(
                    entry, functools.partial(self._process, entry, victims, admitted_now, result)
                )
        for queue_name, usage in self._cycle_holds:
            self.tree.remove(queue_name, usage)
        for target in victims.values():
            self._preempt(target, result)
        for entry, told in standing:
            self.status[entry.workload.key] = told
            result.evaluated[entry.workload.key] = told
            heads.append(entry)
        kept = self._tell_kept(blocks, result)
        self._remember_standing(before, blocks, standing)
        self._remember_quiet(before, heads, result, kept)
        for evaluated in quiet.values():
            result.evaluated.update(evaluated)
        return result

    def _to_process(self, entry: Entry) -> Entry:
        """The head's entry as the cycle processes it. Its figures read since
        its assignment was made stay beside it, unworded: processing reads
        the assignment's flavors, modes and usage, which they do not change,
        and words them only into what it says (``_no_fit``, ``_no_victims``,
        ``_process``). Most heads processed so are refused again, and a
        reused answer's wording was 2% of a replay. A watch over processing
        (a rehearsal) is given the entry worded, as it reads the assignment."""
        if self.process_watch is None:
            return entry
        return self._worded(entry)

    def _nominate(self, workload: Workload, queue: ClusterQueue) -> tuple[Entry, Witness | None]:
        """The head's entry, and what it read if only what ``Witness`` holds."""
        if any(
            s in (CheckState.RETRY, CheckState.REJECTED) for s in workload.check_states.values()
        ):
            failed = Entry(
                workload,
                queue,
                None,
                pending=Pending("PendingEvaluation", "The workload has failed admission checks"),
            )
            return failed, None
        assignment, witness = self._assign_read(workload)
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
            if searched is None:
                preemptor = self.preemptor_for(set())
                searched = preemptor.targets(workload, queue, assignment.contested, requests)
                self.hopeless += preemptor.hopeless
                self.found_in_order += preemptor.found_in_order
                if preemptor.looked_past_queue:
                    witness = None
                elif witness is not None and preemptor.hopeless_reads:
                    searches = (*witness[2], *preemptor.hopeless_reads)
                    witness = (witness[0], witness[1], searches)
            entry.targets = searched
        if entry.targets and not fits_on_nodes(
            self.placer, workload, assignment, {t.workload.key for t in entry.targets}
        ):
            # The victims the quota asks for would not free room where the pods
            # must go: preempting them would only churn.
            entry.targets = []
        in_part = partial.admissible_in_part(workload)
        if not assignment.fits and not entry.targets and in_part:
            fewer = partial.search(workload, lambda counts: self._try_counts(workload, counts))
            if fewer is not None:
                entry.assignment, entry.targets = fewer
        if entry.targets or in_part:
            witness = None  # its victims, or the smaller counts, came from its whole tree
        return entry, witness

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
            preemptor = self.preemptor_for(set())
            targets = preemptor.targets(smaller, queue, assignment.contested, requests)
            self.hopeless += preemptor.hopeless
            self.found_in_order += preemptor.found_in_order
            if targets:
                return assignment, targets
        return None

    def _ordered(self, entries: list[Entry]) -> Iterable[Entry]:
        if self.policy.fair_sharing:
            # A generator: each pick reads the shares as the entries before it left them.
            return fair_order(self.tree, entries)
        if len(entries) < 2:
            return entries
        return sorted(entries, key=_classic_order)

    def _process(
        self, entry: Entry, victims: dict[str, Target], admitted_now: set[str], result: CycleResult
    ) -> None:
        refused = self._refusal(entry, victims)
        if refused is not None:
            pending, requeue_reason = refused
            self._leave_pending(entry, pending, requeue_reason, result)
            return
        workload, queue, assignment = entry.workload, entry.queue, entry.assignment
        assert assignment is not None
        for target in entry.targets:
            victims[target.workload.key] = target
            self._preemptors[target.workload.key] = workload.key
        if assignment.needs_preemption:
            self.tree.add(queue.name, assignment.usage)
            self._cycle_holds.append((queue.name, assignment.usage))
            count = len(entry.targets)
            worded = entry.worded().assignment  # with the figures it read since
            assert worded is not None
            self._leave_pending(
                entry,
                Pending(
                    "WaitingForPreemptedWorkloads",
                    f"{worded.message()}. Pending the preemption of {count} workload(s)",
                ),
                "PendingPreemption",
                result,
            )
            return
        self._reserve_quota(entry, admitted_now, result)

    def _standing(self, entry: Entry) -> Pending | None:
        """What the head is told if processing it would only leave it pending,
        reading and holding nothing in the cycle: failed checks, no fit, or
        preemption needed with no victims where its queue holds no capacity
        for it (it may reclaim from any). A StrictFIFO head that would go back
        where it was then needs no popping, ordering or requeueing: whatever
        else the cycle does, it is told the same. None otherwise."""
        if entry.targets:
            return None
        if entry.pending is not None:
            return entry.pending
        assignment = entry.assignment
        assert assignment is not None
        if assignment.mode is Mode.NO_FIT:
            return self._no_fit(entry, assignment)
        if (
            assignment.needs_preemption
            and entry.queue.preemption.reclaim_within_cohort is ReclaimWithinCohort.ANY
        ):
            return self._no_victims(entry, assignment)
        return None

    # Worded once: a reused nomination keeps its wording, as its assignment.

    def _no_fit(self, entry: Entry, assignment: Assignment) -> Pending:
        if entry.told is None:
            reason = self._no_fit_reason(assignment)
            entry.told = Pending.worded(reason, assignment, entry.figures)
        return entry.told

    @staticmethod
    def _no_victims(entry: Entry, assignment: Assignment) -> Pending:
        if entry.told is None:
            entry.told = Pending.worded("WaitingForQuota", assignment, entry.figures)
        return entry.told

    def _refusal(self, entry: Entry, victims: dict[str, Target]) -> tuple[Pending, str] | None:
        """Why the entry stays pending this cycle, and the reason its queue
        requeues it with; None if it goes ahead. A head that needs preemption
        but found no victims holds the capacity it waits for, for this cycle
        (unless its queue may reclaim from any)."""
        if entry.pending is not None:
            return entry.pending, "Inadmissible"
        workload, queue, assignment = entry.workload, entry.queue, entry.assignment
        assert assignment is not None
        if assignment.mode is Mode.NO_FIT:
            return self._no_fit(entry, assignment), "NoFit"
        if assignment.needs_preemption and not entry.targets:
            if queue.preemption.reclaim_within_cohort is not ReclaimWithinCohort.ANY:
                self._hold_capacity(entry)
            return self._no_victims(entry, assignment), "PreemptionNoCandidates"
        if any(t.workload.key in victims for t in entry.targets):
            return (
                Pending(
                    "WaitingForQuota",
                    "Workload has overlapping preemption targets with another workload",
                ),
                "FailedAfterNomination",
            )
        if not self._fits_without(
            queue.name, assignment.usage, [*victims.values(), *entry.targets]
        ) or (assignment.fits and not fits_on_nodes(self.placer, workload, assignment)):
            return (
                Pending(
                    "WaitingForQuota", "Workload no longer fits after processing another workload"
                ),
                "FailedAfterNomination",
            )
        return None

    def _reserve_quota(self, entry: Entry, admitted_now: set[str], result: CycleResult) -> None:
        """The entry fits: its quota is reserved, and it is admitted unless
        admission checks must answer first."""
        workload, queue, assignment = entry.workload, entry.queue, entry.assignment
        assert assignment is not None
        workload.admission = assignment.flavors()
        workload.admitted_counts = assignment.counts
        workload.admitted_at = self.now
        # Ordered by its creation time again (an AdmissionCheck eviction's time
        # only counts while it waits to be admitted again).
        workload.queued_at = workload.creation_time
        # What it holds is what its assignment asked for (Workload.usage of
        # the flavors and counts just set), a copy: 1.6% of a replay worked
        # out again from its pod sets.
        self._hold(workload, dict(assignment.usage))
        if self.ledger is not None and self.queues[queue.name].ranking is not None:
            self.ledger.admitted(workload)
        admitted_now.add(workload.key)
        self.queues[queue.name].remove(workload.key)
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
            used = node.used(fr)
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
            self.evicting_held[victim.cluster_queue][victim.key] = victim
            self.changed_tree(victim.cluster_queue)
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
        severe cause among its unusable flavors; across groups, the most severe.
        Plain loops: asked at every new answer of a waiting gang (2% of a
        replay as min and max over generators with key functions)."""
        failing = None
        for pod_set in assignment.pod_sets:
            if pod_set.mode is Mode.NO_FIT:
                failing = pod_set
                break
        if failing is None:
            raise ValueError("no pod set of the assignment is NoFit")
        reason = "NoMatchingFlavor"
        worst = -1
        for causes in failing.attempts:
            least = ""
            for cause in causes.values():
                if not least or _SEVERITY[cause] < _SEVERITY[least]:
                    least = cause
            if least and _SEVERITY[least] > worst:
                reason, worst = least, _SEVERITY[least]
        return reason
