"""A cohort tree's standing heads (``StandingBlock``): the StrictFIFO heads
its cycles left standing, told again at once while what they read holds,
with what each answer over ranges of the root's usage read
(``RangedReading``). ``NominationMemory`` keeps one block per tree.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from queues.engine.model import FlavorResource, Workload
from queues.engine.outcomes import Entry, Pending
from queues.engine.quota import Cell
from queues.engine.witness import Nomination


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RangedReading:
    """What a head's answer over ranges (``StandingBlock``) read of one
    flavor-resource: its queue's cell and the root's, the range of the
    root's usage the answer holds over (``Cell.fits_between``, raised to
    what its hopeless searches saw), and the room it was last told. Fields,
    not a tuple in a dict: read for every such head at every change in its
    tree."""

    def __init__(
        self, fr: FlavorResource, cell: Cell, above: Cell, low: int, high: int, room: int
    ) -> None:
        self.fr = fr
        self.cell = cell
        self.above = above
        self.low = low
        self.high = high
        self.room = room
        # Scratch for refigure: the room found at the root's usage now.
        self.found = room


# A head's answer over ranges (StandingBlock): its queue's version, its
# readings, and the queue order time its hopeless victim searches were
# asked at (None: it asked none).
RangedAnswer = tuple[int, list[RangedReading], float | None]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class BlockHead:
    """One queue's head in its tree's block: the workload, its entry, its
    queue's version when its answer holds over ranges (else -1), and its
    nomination in the scheduler's table then, with how often the table had
    been cleared. One lookup for what a cycle checks of every head it
    tells with the block (``NominationMemory._told_by_block``)."""

    def __init__(
        self,
        workload: Workload,
        entry: Entry,
        ranged_version: int,
        nomination: Nomination | None,
        cleared: int,
    ) -> None:
        self.workload = workload
        self.entry = entry
        self.ranged_version = ranged_version
        self.nomination = nomination
        self.cleared = cleared


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class StandingBlock:
    """The StrictFIFO heads of one cohort tree that its cycles left
    standing (``Scheduler._standing``), with what each was told, at the
    tree's version then. While the version holds and a head is still the
    one resting in its queue, its nomination is the one reused and it is
    told the same (``_nomination``, ``_standing``): a cycle tells the block
    at once instead of asking each head. A busy tree has dozens of such
    heads, waiting in every cycle an arrival elsewhere in it brings.

    Once the version has moved (quota taken or given back in the tree),
    a head right below the root whose nomination read only its own queue,
    whether each request fits and victim searches that were hopeless still
    holds while the root's usage is in its ranges: where each request fits
    as it did (``Cell.fits_between``), and no less is used than when each
    search was asked (``preemption.hopeless_as_used``). It is told its
    answer again with the room its requests find at that usage
    (``refigure``), as asking would word it (``_read_again``,
    ``assign.refreshed``)."""

    def __init__(self, version: int) -> None:
        self.version = version
        # By ClusterQueue: its resting head, with that head's entry (and its
        # queue's version then, if its answer holds over ranges).
        self.heads: dict[str, BlockHead] = {}
        # By workload key: what each was told. Kept as it is in
        # NominationMemory._quiet while the tree is quiet: changed only
        # when the tree is cycled again (add, drop_unkept, refigure).
        self.told: dict[str, Pending] = {}
        # By ClusterQueue, of the heads whose answers hold over ranges: its
        # ranges, and the room it was last told its requests found.
        self.readings: dict[str, list[RangedReading]] = {}
        # Of those that asked hopeless victim searches: the queue order time
        # they were asked at (hopeless_as_used holds them to it).
        self.searching: dict[str, float] = {}
        # Scratch for the cycle under way, set by _standing_block: the queues
        # whose head it found still resting there and told with the block;
        # whether the tree's version is still the block's (else only ranged
        # heads are told with it); and, if not, the ranged heads whose
        # ranges the root's usage has left (asked again) and those told with
        # other figures (refigure).
        self.kept: list[str] = []
        self.version_holds = True
        self.lapsed: set[str] = set()
        self.refigured: set[str] = set()
        # Whether the scheduler's status holds what ``told`` says of every
        # head (NominationMemory._tell_kept writes it there): cleared where
        # a head joins or is told other figures (a head dropped leaves the
        # rest as they were). Nothing else writes a resting head's status,
        # so a block told again unchanged need not write it again: 0.9% of
        # a replay, a dict set per head per cycle.
        self.in_status = False

    def add(
        self,
        entry: Entry,
        told: Pending,
        ranged: RangedAnswer | None,
        nomination: Nomination | None,
        cleared: int,
    ) -> None:
        name = entry.queue.name
        self.told[entry.workload.key] = told
        self.in_status = False
        if ranged is None:
            self.heads[name] = BlockHead(entry.workload, entry, -1, nomination, cleared)
            return
        version, self.readings[name], ordered = ranged
        self.heads[name] = BlockHead(entry.workload, entry, version, nomination, cleared)
        if ordered is not None:
            self.searching[name] = ordered

    def resting_head(self, name: str, resting: Workload) -> BlockHead | None:
        """The queue's head in the block, if it is ``resting``, the head
        resting there now."""
        head = self.heads.get(name)
        return head if head is not None and head.workload is resting else None

    def drop_unkept(self) -> None:
        """Only the heads the cycle found still resting stay."""
        if len(self.kept) == len(self.heads):
            return
        kept = set(self.kept)
        for name in [name for name in self.heads if name not in kept]:
            head = self.heads.pop(name)
            del self.told[head.workload.key]
            if self.readings.pop(name, None) is not None:
                self.searching.pop(name, None)

    def refigure(self) -> None:
        """Each ranged head whose ranges hold the root's usage now told with
        the room its requests find there (the answer is the same but for
        these figures), as a fresh ``Pending`` where they moved, worded only
        if read, as a head asked again is (``Pending.worded``); the others
        lapsed, to be asked again."""
        refigured = self.refigured
        for name, readings in self.readings.items():
            held = True
            for reading in readings:
                used = reading.above.used
                if used < reading.low or used > reading.high:
                    held = False
                    break
            if held and self.searching:
                ordered = self.searching.get(name)
                held = ordered is None or ordered == self.heads[name].workload.queue_order_time
            if not held:
                self.lapsed.add(name)
                continue
            # Each room worked out once: kept in ``found`` until it is
            # known whether any moved.
            moved = False
            for reading in readings:
                reading.found = max(0, reading.cell.available())
                if reading.found != reading.room:
                    moved = True
            if not moved:
                continue
            figures: dict[FlavorResource, int] = {}
            for reading in readings:
                reading.room = reading.found
                figures[reading.fr] = reading.room
            entry = self.heads[name].entry
            assignment = entry.assignment
            assert assignment is not None  # a ranged head's answer is its assignment's
            key = entry.workload.key
            self.told[key] = Pending.worded(self.told[key].reason, assignment, figures)
            self.in_status = False
            refigured.add(name)

    def told_kept(self) -> dict[str, Pending]:
        """What the heads the cycle found resting were told."""
        if len(self.kept) == len(self.heads):
            return self.told
        told = self.told
        heads = self.heads
        return {heads[name].workload.key: told[heads[name].workload.key] for name in self.kept}
