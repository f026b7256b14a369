"""What a nomination read, kept beside its answer so that a later cycle can
tell, by reading the same figures again, whether asking again would give the
same answer (``NominationMemory._read_again``).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from queues.engine.assign import Mode
from queues.engine.model import FlavorResource
from queues.engine.outcomes import Entry
from queues.engine.quota import CellReading
from queues.engine.victim_search import HopelessRead

# What a nomination read, when that was only its own ClusterQueue (its version
# in SchedulerState.queue_versions), its quota checks' readings, and victim
# searches that found none at once (at the queue's borrowing limit, which its
# version covers, or as hopeless, in HopelessRead). Its answer then depends on
# the readings only through which requests fit at what borrowing level: every
# victim search it asked came back empty (see assign.refreshed).
Witness = tuple[int, tuple[CellReading, ...], tuple[HopelessRead, ...]]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Nomination:
    """A head's last nomination: its tree's version then, its entry, and
    what it read (``Witness``; None: more than that). Fields, set again in
    place when the answer is read again (``_read_again``), asked afresh or
    worded (``_worded``): a tuple would be made, and its table entry
    written, at each of those, millions of them in a busy month."""

    def __init__(self, version: int, entry: Entry, witness: Witness | None) -> None:
        self.version = version
        self.entry = entry
        self.witness = witness


def as_asked(witness: Witness | None) -> object:
    """What a witness says was asked and answered, without the usage its
    victim searches saw (``HopelessRead``'s last part): a snapshot of the
    tree, which a reused answer keeps from when it was first asked."""
    if witness is None:
        return None
    version, reads, searches = witness
    return version, tuple(read.asked() for read in reads), tuple(search[:4] for search in searches)


def quota_only(entry: Entry) -> bool:
    """Whether the nomination's quota checks each fit, or could not fit with
    no victim search asked: its answer then rests on its checks' readings
    alone (``assign.FlavorAssigner._fits_quota``)."""
    assignment = entry.assignment
    if assignment is None:
        return False
    for pod_set in assignment.pod_sets:
        for check in pod_set.checks:
            if check.mode is not Mode.FIT and check.mode is not Mode.NO_FIT:
                return False
    return True


def witness_now(
    witness: Witness,
    moved: dict[FlavorResource, int],
    searches: tuple[HopelessRead, ...],
    own: int,
) -> Witness:
    """What a nomination read again has read now: the room that moved, and
    the range over which it stays (a later reading is compared with these).
    While its queue's version is the one it was asked at, a range is worked
    out again only where the room moved: one that did not is where it was,
    or was not known; once its own usage moved, every range is."""
    version, reads, _ = witness
    anew = own != version
    if anew or moved:
        reads = tuple(
            CellReading(
                read.fr,
                read.value,
                moved.get(read.fr, read.available),
                read.level,
                read.cell.steady_between() if anew or read.fr in moved else read.steady(),
                read.cell,
            )
            for read in reads
        )
    return own, reads, searches
