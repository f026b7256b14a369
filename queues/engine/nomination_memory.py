"""What the scheduler remembers between cycles, so as not to ask again what
cannot have changed: each head's last nomination and what it read, and the
cohort trees whose last cycle changed nothing.

A busy month replays millions of cycles, most of them in trees where a few
heads wait for room that does not come (a StrictFIFO gang that cannot fit);
asked afresh every time, they are most of a replay. Every answer given from
memory is the answer asking would give (``check_reuse`` asks both and
compares; ``reuse_nominations`` off asks afresh).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterable

from mypy_extensions import mypyc_attr

from queues.engine.assign import Read
from queues.engine.model import ClusterQueue, FlavorResource, Policy, Workload
from queues.engine.outcomes import CycleResult, Entry, Pending
from queues.engine.scheduler_state import SchedulerState
from queues.engine.victim_search import HopelessRead

# What a nomination read, when that was only its own ClusterQueue (its version
# in SchedulerState.queue_versions), its quota checks' readings, and victim
# searches that found none at once (at the queue's borrowing limit, which its
# version covers, or as hopeless, in HopelessRead). Its answer then depends on
# the readings only through which requests fit at what borrowing level: every
# victim search it asked came back empty (see assign.refreshed).
Witness = tuple[int, tuple[Read, ...], tuple[HopelessRead, ...]]


def _as_asked(witness: Witness | None) -> object:
    """What a witness says was asked and answered, without the usage its
    victim searches saw (``HopelessRead``'s last part): a snapshot of the
    tree, which a reused answer keeps from when it was first asked."""
    if witness is None:
        return None
    version, reads, searches = witness
    return version, tuple(read[:4] for read in reads), tuple(search[:4] for search in searches)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class NominationMemory(SchedulerState):
    """Cluster state, and what its cycles remember (the cycle itself is
    ``queues.engine.scheduler.Scheduler``'s)."""

    def __init__(
        self, policy: Policy, workloads: Iterable[Workload] = (), now: float = 0.0
    ) -> None:
        # Each pending head's last nomination, with its tree's version then.
        self._nominations: dict[str, tuple[int, Entry, Witness | None]] = {}
        # Per cohort tree whose last cycle changed nothing: its signature then
        # and what that cycle reported for its heads (see _quiet_trees).
        self._quiet: dict[str, tuple[tuple[int, int], dict[str, Pending]]] = {}
        # False: every head is nominated afresh (what the reuse is checked against).
        self.reuse_nominations = True
        # True: every reused answer is also asked afresh and must equal it, with
        # what it read (tests: an AssertionError says where they part).
        self.check_reuse = False
        # What nominating cost: fresh nominations per ClusterQueue, and answers reused.
        self.nominated: dict[str, int] = {}
        self.reused = 0
        # Answers given again with only their figures read anew (assign.refreshed).
        self.refreshed = 0
        # StrictFIFO heads told they stay pending where they were, not popped (_standing).
        self.left_standing = 0
        super().__init__(policy, workloads, now)

    def _nominate(self, workload: Workload, queue: ClusterQueue) -> tuple[Entry, Witness | None]:
        """The head's entry asked afresh, and what it read if only ``Witness``'s
        figures (the scheduler's)."""
        raise NotImplementedError

    def _still_without_victims(
        self, workload: Workload, queue: ClusterQueue, searches: tuple[HopelessRead, ...]
    ) -> tuple[HopelessRead, ...] | None:
        """Those victim searches as they stand if each would again find no
        victims at once, else None (the scheduler's)."""
        raise NotImplementedError

    def _signature(self, root: str) -> tuple[int, int]:
        """What a cycle in the tree reads: its quota (and who holds it) and what
        its queues hold."""
        return self.tree_versions[root], self.board.epochs.get(root, 0)

    def _skipping_allowed(self) -> bool:
        # Outside these a quiet tree's next cycle may differ with nothing in it
        # changed: victims ordered by the clock, LocalQueue usage sampled over
        # time, and fair sharing's order across trees (which orders what the
        # cycle reports).
        return (
            self.reuse_nominations
            and not self.unstamped
            and self.ledger is None
            and not self.policy.fair_sharing
        )

    def _quiet_trees(self, groups: set[str] | None) -> dict[str, dict[str, Pending]]:
        """The trees of ``groups`` (None: all) whose last cycle changed
        nothing there and in which nothing changed since: this cycle would
        evaluate the same heads to the same answers (a StrictFIFO gang that
        cannot fit, in every cycle of every event elsewhere), so it reports
        those answers without asking."""
        if not self._quiet or not self._skipping_allowed():
            self._quiet.clear()
            return {}
        quiet: dict[str, dict[str, Pending]] = {}
        # The others are looked at when their groups cycle next.
        roots = (
            list(self._quiet)
            if groups is None
            else [
                root
                for group in groups
                for root in self.roots_in.get(group, ())
                if root in self._quiet
            ]
        )
        for root in roots:
            signature, evaluated = self._quiet[root]
            if signature == self._signature(root):
                quiet[root] = evaluated
            else:
                del self._quiet[root]
        return quiet

    def _remember_quiet(
        self, before: dict[str, tuple[int, int]], heads: list[Entry], result: CycleResult
    ) -> None:
        if not self._skipping_allowed():
            return
        evaluated: dict[str, dict[str, Pending]] = {root: {} for root in before}
        for entry in heads:
            root = self._root_of[entry.queue.name]
            pending = result.evaluated.get(entry.workload.key)
            if pending is None or entry.workload.check_states:
                # Admitted (the tree changed), or its checks may be answered meanwhile.
                before.pop(root, None)
            elif root in evaluated:
                evaluated[root][entry.workload.key] = pending
        for root, signature in before.items():
            if signature == self._signature(root):
                self._quiet[root] = (signature, evaluated[root])
            else:
                self._quiet.pop(root, None)

    def _nomination(self, workload: Workload, queue: ClusterQueue) -> Entry:
        """The head's entry for this cycle. Nominating reads only its tree's
        quota, what holds it and who is being evicted there, so when none of
        that has changed since its last nomination the answer is the same and is
        reused: a StrictFIFO gang that cannot fit is the head of its queue in
        every cycle, whatever the event, in any tree."""
        version = self.tree_versions[self._root_of[queue.name]]
        known = self._nominations.get(workload.key)
        if (
            self.reuse_nominations
            and known is not None
            and known[1].workload is workload
            and not self.unstamped
            and not workload.check_states
        ):
            if known[0] == version:
                self.reused += 1
                if self.check_reuse:
                    self._check_reused(known[1], known[2], workload, queue)
                return known[1]
            witness = known[2]
            again = None if witness is None else self._read_again(workload, queue, witness)
            if witness is not None and again is not None:
                entry = known[1]
                moved, searches = again
                if searches is not witness[2]:
                    witness = (witness[0], witness[1], searches)
                if moved:
                    # Worded when read (_worded, Pending.worded): a head left
                    # standing is mostly never read.
                    figures = {**entry.figures, **moved} if entry.figures else moved
                    entry = Entry(workload, queue, entry.assignment, figures=figures)
                    # What it read now: a later reading is compared with these.
                    # A range is worked out again only where the room moved:
                    # one that did not is where it was, or was not known.
                    node = self.tree.queues[queue.name]
                    reads = tuple(
                        (fr, v, was, level, steady)
                        if fr not in moved
                        else (fr, v, moved[fr], level, node.steady_between(fr))
                        for fr, v, was, level, steady in witness[1]
                    )
                    witness = (witness[0], reads, witness[2])
                    self.refreshed += 1
                else:
                    self.reused += 1
                self._nominations[workload.key] = (version, entry, witness)
                if self.check_reuse:
                    self._check_reused(entry, witness, workload, queue)
                return entry
        self.nominated[queue.name] = self.nominated.get(queue.name, 0) + 1
        entry, witness = self._nominate(workload, queue)
        if len(self._nominations) > 4 * len(self.workloads) + 1024:
            self._nominations.clear()  # of workloads gone other than by finish()
        self._nominations[workload.key] = (version, entry, witness)
        return entry

    def _worded(self, entry: Entry) -> Entry:
        """The nomination with the figures it read since its assignment was
        made worded into it, as a head the cycle processes needs it; it then
        stands in for the nomination."""
        worded = entry.worded()
        if worded is entry:
            return entry
        key = entry.workload.key
        known = self._nominations.get(key)
        if known is not None and known[1] is entry:
            self._nominations[key] = (known[0], worded, known[2])
        return worded

    def _check_reused(
        self, entry: Entry, witness: Witness | None, workload: Workload, queue: ClusterQueue
    ) -> None:
        entry = entry.worded()
        fresh, read = self._nominate(workload, queue)
        given = (entry.assignment, entry.targets, entry.pending)
        if given != (fresh.assignment, fresh.targets, fresh.pending):
            raise AssertionError(f"{workload.key}: reused {given}, afresh {fresh}")
        if witness is not None and _as_asked(witness) != _as_asked(read):
            raise AssertionError(f"{workload.key}: reused having read {witness}, afresh {read}")

    def _read_again(
        self, workload: Workload, queue: ClusterQueue, witness: Witness
    ) -> tuple[dict[FlavorResource, int], tuple[HopelessRead, ...]] | None:
        """Whether a nomination that read only ``witness`` would give the same
        answer now; None if it might not. The same answer, whatever else
        changed in its tree (a StrictFIFO gang whose queue borrows up to its
        limit, asked again at every change in a busy cohort), when its queue is
        unchanged, every quota check finds the same room at the same
        borrowing level and every victim search it asked still finds none at
        once: then {}. When only the room differs, but each request still fits
        or not as it did, the answer is the same but for its figures: then the
        available figures that changed, by flavor-resource (assign.refreshed
        words the answer with them). With them, its victim searches as they
        stand now (``_still_without_victims``)."""
        version, reads, searches = witness
        if self.queue_versions[queue.name] != version:
            return None
        node = self.tree.queues[queue.name]
        parent = node.parent
        # Below a root (or as one) a queue's borrowing level reads only its own
        # usage, which its version covers: the same level, not worked out again.
        levels_hold = parent is None or parent.parent is None
        figures: dict[FlavorResource, int] = {}
        for fr, value, available, level, steady in reads:
            if steady is not None and parent is not None:
                # Its own usage as it was (its version), and the parent's
                # where the room does not move: available as it was.
                used = parent.usage.get(fr, 0)
                if steady[0] <= used <= steady[1]:
                    continue
            now = max(0, node.available(fr))
            if now != available:
                if (value <= now) != (value <= available):
                    return None
                figures[fr] = now
            if level is not None and not levels_hold and node.borrowing_level(fr, value) != level:
                return None
        if searches:
            standing = self._still_without_victims(workload, queue, searches)
            if standing is None:
                return None
            searches = standing
        return figures, searches
