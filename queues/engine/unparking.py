"""Parked work told again where it is, when queueing it again would only
park it again.

Capacity freed in a cohort tree asks its parked BestEffortFIFO work to queue
again (``SchedulerState.apply_unpark_requests``, ``requeue_delay`` after the
event). The cycles that follow pop the head of each parked shape, one per
queue per cycle, ask it again, and mostly park it again: most unparkings in
a busy month change nothing. When the group is quiet then (its last cycle
changed nothing, and nothing its cycles read changed since, that time's
other events included: ``NominationMemory._quiet_trees``), and each such
head would be told it cannot fit, or finds no victims, those cycles can
only tell each head that and park it again where it was; so each is told,
in place, and the cycles are counted as they would have run. A head that finds no victims
where its queue may not reclaim from any holds the capacity it waits for in
each of those cycles (``Scheduler._hold_capacity``): then every other head
in its tree must be one left standing, which reads none.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from queues.engine.outcomes import Entry, Pending
from queues.engine.scheduler import Scheduler
from queues.engine.settling import Settler


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class DueUnparkings:
    """An event time's unparkings (``Simulator``), held until its other
    events are in, then told in place where they can be; the others' parked
    work queues again. Had it at its event, as before: what else happened
    at the time only parked more of it (queued again with it), or asked for
    another unparking (kept for later). Whatever else happened in a group
    that its cycles would see moved its signature: it is not quiet, and its
    parked work queues again (``park_again_in_place``)."""

    def __init__(self) -> None:
        # By group, the trees whose parked work asked to queue again.
        self.roots: dict[str, set[str]] = {}

    def hold(self, scheduler: Scheduler, group: str) -> None:
        """The group's unparking is due: its trees' requests are taken now."""
        roots = scheduler.take_unpark_requests({group})
        held = self.roots.get(group)
        self.roots[group] = roots if held is None else held | roots

    def apply(self, scheduler: Scheduler, settler: Settler, touched: set[str]) -> set[str]:
        """The unparkings held, done: of the groups ``touched`` at the
        event time, those left to cycle (``touched`` itself when none was
        held: most event times), not those told in place, whose cycles
        ``settler`` counted. With no requeue delay there are none to hold
        but a group's that backs off after a livelock, due with its retry:
        not quiet."""
        if not self.roots:
            return touched
        due, self.roots = self.roots, {}
        left = set(touched)
        for group, roots in sorted(due.items()):
            rounds = park_again_in_place(scheduler, group, roots)
            if rounds is None:
                scheduler.unpark_roots(roots)
            else:
                settler.settled_in_place(group, rounds)
                left.discard(group)
        return left


def park_again_in_place(scheduler: Scheduler, group: str, roots: set[str]) -> int | None:
    """The parked heads in ``roots`` (trees of ``group`` asking to unpark)
    told again where they are, as the cycles after unparking them would tell
    them; the number of cycles that would have told them something new (the
    last, which tells every head as before, is one more), both counted in
    ``scheduler.cycles``. None, with nothing parked or told, when those
    cycles might do more (the caller unparks them then)."""
    # Work backing off is queued at a cycle's start, which its requeue event
    # asks for without moving the group's signature.
    if scheduler.backing_off:
        return None
    if not scheduler._asks_nothing(group):
        return None  # its heads might change something in those cycles
    board = scheduler.board
    # By head: a dict, not pairs in a list (compiled, each pair a tuple made
    # and unpacked; an unparking tells thousands of heads).
    told: dict[str, Pending] = {}
    holding: set[str] = set()
    rounds = 0
    for name in board.parked_among(roots):
        heads = scheduler.queues[name].parked_heads()
        if heads is None:
            return None
        queue = scheduler.policy.cluster_queues[name]
        for workload in heads:
            entry = scheduler._nomination(workload, queue)
            refused = _refused(scheduler, entry, holding, name)
            if refused is None:
                return None
            told[workload.key] = refused
        rounds = max(rounds, len(heads))
    if not rounds or (holding and not _all_standing(scheduler, group, holding)):
        return None
    scheduler.status.update(told)
    scheduler.cycles += rounds + 1
    return rounds


def _refused(scheduler: Scheduler, entry: Entry, holding: set[str], name: str) -> Pending | None:
    """What processing the head would tell it, if that parks it again with
    nothing changed (``Scheduler._refusal``'s first answers: no fit, or no
    victims); the tree of its queue (``name``) is put in ``holding`` when it
    would hold capacity for the rest of the cycle meanwhile. None
    otherwise: failed checks queue it again on its own."""
    if entry.pending is not None:
        return None
    told = scheduler._standing(entry)  # holding nothing
    if told is not None:
        return told
    assignment = entry.assignment
    if assignment is not None and assignment.needs_preemption and not entry.targets:
        # No victims, where its queue may not reclaim from any (_standing's other case).
        holding.add(scheduler._root_of[name])
        return scheduler._no_victims(entry, assignment)
    return None


def _all_standing(scheduler: Scheduler, group: str, roots: set[str]) -> bool:
    """Whether every head waiting in those trees is a StrictFIFO head told it
    stays pending without being processed (``Scheduler._standing``): one
    processed could read capacity a parked head holds in the cycle. The
    trees are quiet, so those are the heads their last cycle left standing
    (``StandingBlock``), still resting where they were."""
    root_of = scheduler._root_of
    blocks = scheduler._blocks
    for name in scheduler.board.ready_among({group}):
        root = root_of[name]
        if root not in roots:
            continue
        block = blocks.get(root)
        resting = scheduler.queues[name].resting
        if block is None or resting is None or block.resting_head(name, resting) is None:
            return False
    return True
