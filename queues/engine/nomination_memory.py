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

from queues.engine.model import ClusterQueue, FlavorResource, Policy, Workload
from queues.engine.outcomes import CycleResult, Entry, Pending
from queues.engine.queueing import forget
from queues.engine.scheduler_state import SchedulerState
from queues.engine.standing_block import RangedAnswer, RangedReading, StandingBlock
from queues.engine.victim_search import HopelessRead
from queues.engine.witness import Nomination, Witness, as_asked, quota_only, witness_now


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QuietTree:
    """A cohort tree whose last cycle changed nothing: its signature then
    (``NominationMemory._signature``) and what that cycle reported for its
    heads. Fields, not a tuple: compiled, a tuple of two ints is taken
    apart and packed again each time it is read or kept."""

    def __init__(self, version: int, epoch: int, evaluated: dict[str, Pending]) -> None:
        self.version = version
        self.epoch = epoch
        self.evaluated = evaluated


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class NominationMemory(SchedulerState):
    """Cluster state, and what its cycles remember (the cycle itself is
    ``queues.engine.scheduler.Scheduler``'s)."""

    def __init__(
        self, policy: Policy, workloads: Iterable[Workload] = (), now: float = 0.0
    ) -> None:
        # Each pending head's last nomination, with its tree's version then.
        self._nominations: dict[str, Nomination] = {}
        # How often the table was cleared: a block's head keeps its
        # nomination, which a clear lets go (StandingBlock, _told_by_block).
        self._cleared = 0
        # Per cohort tree whose last cycle changed nothing: its signature then
        # and what that cycle reported for its heads (see _quiet_trees).
        self._quiet: dict[str, QuietTree] = {}
        # False: every head is nominated afresh (what the reuse is checked against).
        self.reuse_nominations = True
        # False: every standing head is asked, none told with its tree's block
        # (StandingBlock; what the blocks are checked against).
        self.standing_blocks = True
        # True: every reused answer is also asked afresh and must equal it, with
        # what it read (tests: an AssertionError says where they part).
        self.check_reuse = False
        # What nominating cost: fresh nominations per ClusterQueue, and answers reused.
        self.nominated: dict[str, int] = {}
        self.reused = 0
        # Answers given again with only their figures read anew (assign.refreshed).
        self.refreshed = 0
        # Answers given again, with their figures or not, once their own
        # queue's usage had moved (_read_again).
        self.read_after_own_usage_moved = 0
        # StrictFIFO heads told they stay pending where they were, not popped (_standing).
        self.left_standing = 0
        # Per cohort tree, the heads its cycles left standing (StandingBlock),
        # and how many of those were told again with it, unasked.
        self._blocks: dict[str, StandingBlock] = {}
        self.told_with_block = 0
        # Of those, told once quota had moved in their tree (over their
        # ranges), and of these, heads with hopeless victim searches.
        self.told_over_ranges = 0
        self.searches_told_over_ranges = 0
        # False: victim searches walk their candidates even when no walk could
        # free enough (Preemptor._could_fit; what that shortcut is checked against).
        self.stop_when_hopeless = True
        # Reused answers whose hopeless victim searches were asked again, and
        # those of them known to hold from usage alone (hopeless_as_used),
        # told with their block included.
        self.hopeless_asked_again = 0
        self.hopeless_as_used = 0
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
        quiet: dict[str, dict[str, Pending]] = {}
        if not self._remembering_quiet():
            return quiet
        if groups is None:
            self._still_quiet(tuple(self._quiet), quiet)
        else:
            # The others are looked at when their groups cycle next.
            for group in groups:
                self._still_quiet(self.roots_in.get(group, ()), quiet)
        return quiet

    def _remembering_quiet(self) -> bool:
        """Whether any tree is remembered quiet, and may be told from
        memory; where none may, none is remembered."""
        if self._quiet and self._skipping_allowed():
            return True
        self._quiet.clear()
        return False

    def _still_quiet(self, roots: tuple[str, ...], quiet: dict[str, dict[str, Pending]]) -> None:
        """Those of ``roots`` remembered quiet whose signature is still
        theirs, with what they reported, into ``quiet``; the others
        forgotten."""
        memory = self._quiet
        versions = self.tree_versions
        epochs = self.board.epochs
        for root in roots:
            known = memory.get(root)
            if known is None:
                continue
            # _signature, compared a field at a time.
            if known.version == versions[root] and known.epoch == epochs.get(root, 0):
                quiet[root] = known.evaluated
            else:
                del memory[root]

    def _asks_nothing(self, group: str) -> bool:
        """Whether a cycle in the group would visit only queues in quiet
        trees (``_quiet_trees``): it would tell their heads, unasked, what
        their last cycle told them, and change nothing."""
        quiet: dict[str, dict[str, Pending]] = {}
        if self._remembering_quiet():  # _quiet_trees({group}), without the set
            self._still_quiet(self.roots_in.get(group, ()), quiet)
        # Its ready queues are listed (sorted, after most cycles, as their
        # set changed) only when some of its trees are quiet and some not.
        if len(quiet) == len(self.roots_in.get(group, ())) or not self.board.ready_in.get(group):
            return True
        if not quiet:
            return False  # a ready queue, in a tree that is not quiet
        root_of = self._root_of
        return all(root_of[name] in quiet for name in self.board.ready_among({group}))

    def _standing_block(self, root: str) -> StandingBlock | None:
        """The tree's standing heads, if its version is still theirs, or if
        its root's usage is still where their ranged heads' answers hold."""
        block = self._blocks.get(root)
        if block is None:
            return None
        if not self.standing_blocks:
            return None
        block.kept = []
        if block.refigured:
            block.refigured.clear()
        if block.lapsed:
            block.lapsed.clear()
        block.version_holds = block.version == self.tree_versions[root]
        if block.version_holds:
            return block
        if not block.readings:
            return None
        block.refigure()
        return block

    def _told_by_block(self, block: StandingBlock, name: str, resting: Workload) -> bool:
        """Whether the queue's resting head is told as its block says: the
        block's head there, whose nomination is still the one the block
        holds (a cycle that asked it again since, or the table cleared,
        leaves the block behind) and holds as _nomination would find."""
        head = block.resting_head(name, resting)
        if head is None:
            return False
        # The table's nomination, kept with the head: it stays the table's
        # until the table is cleared (or the workload finishes, and rests
        # nowhere), and its entry is the head's until it is asked again.
        known = head.nomination
        if known is None or head.cleared != self._cleared or known.entry is not head.entry:
            return False
        return block.version_holds or (
            head.ranged_version == self.queue_versions[name] and name not in block.lapsed
        )

    def _range_witness(self, entry: Entry) -> RangedAnswer | None:
        """The head's answer over ranges of its root's usage, if it holds
        over such ranges (``StandingBlock``): read only in its own queue,
        right below the root, with no victim search but hopeless ones known
        to hold from usage alone. Its own usage is as the nomination read
        it while its queue's version is."""
        known = self._nominations.get(entry.workload.key)
        if known is None or known.entry is not entry or known.witness is None:
            return None
        version, reads, searches = known.witness
        node = self.tree.queues[entry.queue.name]
        if node.parent is None or node.parent.parent is not None:
            return None
        if searches and not self.stop_when_hopeless:
            return None  # each asked again in full (Scheduler._still_without_victims)
        if self.queue_versions[entry.queue.name] != version:
            return None  # its own usage moved since: never told with the block
        readings: dict[FlavorResource, RangedReading] = {}
        for read in reads:
            fr, value, available, cell = read.fr, read.value, read.available, read.cell
            # Which side as read: the cycle may have moved the root since.
            low, high = cell.fits_between(value, value <= available)
            other = readings.get(fr)
            if other is None:
                above = cell.parent
                assert above is not None  # right below the root, as checked above
                readings[fr] = RangedReading(fr, cell, above, low, high, available)
            else:  # another request of the same flavor-resource
                other.low, other.high = max(low, other.low), min(high, other.high)
        ordered = None
        for _, usage, _, ordered_at, along in searches:
            # What its queue used then is what it uses (its version); the
            # root may use more, not less (hopeless_as_used).
            width = len(usage)
            if len(along) != 2 * width or ordered not in (None, ordered_at):
                return None
            ordered = ordered_at
            for i, fr in enumerate(usage):
                reading = readings.get(fr)
                if reading is None:
                    return None  # not one its quota checks read: not worked out
                reading.low = max(reading.low, along[width + i])
        return version, list(readings.values()), ordered

    def _tell_kept(
        self, blocks: dict[str, StandingBlock | None], result: CycleResult
    ) -> dict[str, dict[str, Pending]]:
        """Each block's heads the cycle found resting, told what they were
        told, counted as if each had been asked (a reused answer, left
        standing); by tree."""
        kept: dict[str, dict[str, Pending]] = {}
        for root, block in blocks.items():
            if block is None or not block.kept:
                continue
            told = block.told_kept()
            if told is not block.told:
                self.status.update(told)
            elif not block.in_status:
                self.status.update(told)
                block.in_status = True
            result.evaluated.update(told)
            # As asking would count them: with other figures, refreshed.
            refreshed = len(block.refigured)
            if refreshed and len(block.kept) < len(block.heads):
                refreshed = sum(1 for name in block.kept if name in block.refigured)
            self.refreshed += refreshed
            self.reused += len(block.kept) - refreshed
            if not block.version_holds and block.searching:
                # Their hopeless searches, known to hold from usage alone.
                searched = sum(1 for name in block.kept if name in block.searching)
                self.hopeless_asked_again += searched
                self.hopeless_as_used += searched
                self.searches_told_over_ranges += searched
            self.left_standing += len(block.kept)
            self.told_with_block += len(block.kept)
            if not block.version_holds:
                self.told_over_ranges += len(block.kept)
            kept[root] = told
        return kept

    def _remember_standing(
        self,
        before: dict[str, tuple[int, int]],
        blocks: dict[str, StandingBlock | None],
        standing: list[tuple[Entry, Pending]],
    ) -> None:
        """Each tree the cycle met: the heads it left standing, as its block
        for the next cycle, at the version they were nominated at
        (``before``: when the cycle began)."""
        fresh: dict[str, list[tuple[Entry, Pending]]] = {}
        for entry, told in standing:
            if entry.workload.check_states:
                continue  # asked afresh each cycle (_nomination): not kept
            root = self._root_of[entry.queue.name]
            fresh.setdefault(root, []).append((entry, told))
        for root, block in blocks.items():
            added = fresh.get(root)
            if block is None or not block.kept:
                if not added:
                    forget(self._blocks, root)
                    continue
                block = StandingBlock(before[root][0])
                self._blocks[root] = block
            else:
                block.drop_unkept()
                block.version = before[root][0]
                self._blocks[root] = block
            for entry, told in added or ():
                known = self._nominations.get(entry.workload.key)
                block.add(entry, told, self._range_witness(entry), known, self._cleared)

    def _remember_quiet(
        self,
        before: dict[str, tuple[int, int]],
        heads: list[Entry],
        result: CycleResult,
        kept: dict[str, dict[str, Pending]],
    ) -> None:
        if not self._skipping_allowed():
            return
        # A tree whose heads were all told with its block reports what the
        # block told, kept as it is (the block's own dict, when it told all
        # its heads): nothing changes it while the tree stays quiet
        # (_quiet_trees drops the tree before its block is read again), and
        # a tree that was quiet a cycle ago mostly is now.
        evaluated: dict[str, dict[str, Pending]] = {}
        for entry in heads:
            root = self._root_of[entry.queue.name]
            pending = result.evaluated.get(entry.workload.key)
            if pending is None or entry.workload.check_states:
                # Admitted (the tree changed), or its checks may be answered meanwhile.
                forget(before, root)
            elif root in before:
                asked = evaluated.get(root)
                if asked is None:
                    told = kept.get(root)
                    asked = evaluated[root] = {} if told is None else dict(told)
                asked[entry.workload.key] = pending
        for root, signature in before.items():
            if signature == self._signature(root):
                asked = evaluated.get(root)
                if asked is None:
                    told = kept.get(root)
                    asked = {} if told is None else told
                self._quiet[root] = QuietTree(signature[0], signature[1], asked)
            else:
                forget(self._quiet, root)

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
            and known.entry.workload is workload
            and not self.unstamped
            and not workload.check_states
        ):
            if known.version == version:
                self.reused += 1
                if self.check_reuse:
                    self._check_reused(known.entry, known.witness, workload, queue)
                return known.entry
            witness = known.witness
            entry = known.entry
            again = None if witness is None else self._read_again(entry, witness)
            if witness is not None and again is not None:
                moved, searches, own = again
                if moved or own != witness[0] or searches is not witness[2]:
                    # Set only when it changed: compiled, the record's
                    # witness set again is a new tuple packed from its items.
                    known.witness = witness_now(witness, moved, searches, own)
                if moved:
                    # Worded when read (Pending.worded): a head told it
                    # stays pending is mostly never read.
                    figures = {**entry.figures, **moved} if entry.figures else moved
                    entry = Entry(workload, queue, entry.assignment, figures=figures)
                    self.refreshed += 1
                else:
                    self.reused += 1
                known.version = version
                known.entry = entry
                if self.check_reuse:
                    self._check_reused(entry, known.witness, workload, queue)
                return entry
        self.nominated[queue.name] = self.nominated.get(queue.name, 0) + 1
        entry, witness = self._nominate(workload, queue)
        if len(self._nominations) > 4 * len(self.workloads) + 1024:
            self._nominations.clear()  # of workloads gone other than by finish()
            self._cleared += 1
            known = None
        if known is None:
            self._nominations[workload.key] = Nomination(version, entry, witness)
        else:
            known.version = version
            known.entry = entry
            known.witness = witness
        return entry

    def _worded(self, entry: Entry) -> Entry:
        """The nomination with the figures it read since its assignment was
        made worded into it, as a watch over processing reads it
        (``Scheduler._to_process``); it then stands in for the nomination."""
        worded = entry.worded()
        if worded is entry:
            return entry
        key = entry.workload.key
        known = self._nominations.get(key)
        if known is not None and known.entry is entry:
            known.entry = worded
        return worded

    def _check_reused(
        self, entry: Entry, witness: Witness | None, workload: Workload, queue: ClusterQueue
    ) -> None:
        entry = entry.worded()
        fresh, read = self._nominate(workload, queue)
        given = (entry.assignment, entry.targets, entry.pending)
        if given != (fresh.assignment, fresh.targets, fresh.pending):
            raise AssertionError(f"{workload.key}: reused {given}, afresh {fresh}")
        if witness is not None and as_asked(witness) != as_asked(read):
            raise AssertionError(f"{workload.key}: reused having read {witness}, afresh {read}")

    def _read_again(
        self, entry: Entry, witness: Witness
    ) -> tuple[dict[FlavorResource, int], tuple[HopelessRead, ...], int] | None:
        """Whether a nomination that read only ``witness`` would give the same
        answer now; None if it might not. The same answer, whatever else
        changed in its tree (a StrictFIFO gang whose queue borrows up to its
        limit, asked again at every change in a busy cohort), when every
        quota check finds the same room at the same borrowing level and every
        victim search it asked still finds none at once: then {}. When only
        the room differs, but each request still fits or not as it did, the
        answer is the same but for its figures: then the available figures
        that changed, by flavor-resource (assign.refreshed words the answer
        with them). With them, its victim searches as they stand now
        (``_still_without_victims``), and its queue's version now.

        Once its own queue's usage moved (its version), only an answer that
        asked no victim search (``quota_only``) is read again, each check in
        full: a search that stopped at the queue's borrowing limit left no
        trace in the witness, and its own candidates may have changed. Its
        queue's BestEffortFIFO heads, parked when one of its own finished,
        are asked again at the next unparking, most of them only to park."""
        version, reads, searches = witness
        workload, queue = entry.workload, entry.queue
        own = self.queue_versions[queue.name]
        own_moved = own != version
        if own_moved and not quota_only(entry):
            return None
        figures: dict[FlavorResource, int] = {}
        for read in reads:
            cell = read.cell
            above = cell.parent
            # Its own usage as it was (its version), and the parent's where
            # the room does not move (none known: an empty range): available
            # as it was.
            if (
                not own_moved
                and above is not None
                and read.steady_low <= above.used <= read.steady_high
            ):
                continue
            value, available = read.value, read.available
            now = max(0, cell.available())
            if now != available:
                if (value <= now) != (value <= available):
                    return None
                figures[read.fr] = now
            level = read.level
            # Below a root (or as one: the queue's cells' parents are its
            # parent's) a queue's borrowing level reads only its own usage,
            # which its version covers: the same level, not worked out again.
            if (
                level is not None
                and (own_moved or (above is not None and above.parent is not None))
                and cell.borrowing_level(value) != level
            ):
                return None
        if searches:
            standing = self._still_without_victims(workload, queue, searches)
            if standing is None:
                return None
            searches = standing
        if own_moved:
            self.read_after_own_usage_moved += 1
        return figures, searches, own
