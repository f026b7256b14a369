"""What a scheduling cycle decides: admissions, reservations, preemptions and
why each evaluated head stays pending; and the head being decided (Entry).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import copyreg
from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from queues.engine.assign import Assignment, refreshed
from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.model import ClusterQueue, FlavorResource, Workload
from queues.engine.victim_search import Reason, Target


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Pending:
    """Why a workload is not admitted: a stable code and Kueue-style text.

    The text of a head its assignment leaves pending (``Pending.worded``) is
    put into words when first read. A StrictFIFO head that cannot fit is told
    so in every cycle of its tree, with the figures of the moment, and in a
    replay nobody reads most of them: worded at once, they were a tenth of
    it. Not a dataclass, for that, but made, compared, hashed, copied and
    pickled as the frozen one it was."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self._message: str | None = message
        # What the text is worded from until it is: an assignment, and the
        # quota figures read since it was made (see assign.refreshed).
        self._assignment: Assignment | None = None
        self._figures: dict[FlavorResource, int] | None = None

    @staticmethod
    def worded(
        reason: str, assignment: Assignment, figures: dict[FlavorResource, int] | None
    ) -> Pending:
        """``assignment``'s message, with ``figures`` worded in, once read."""
        told = Pending(reason, "")
        told._message = None
        told._assignment = assignment
        told._figures = figures
        return told

    @property
    def message(self) -> str:
        message = self._message
        if message is None:
            assignment = self._assignment
            assert assignment is not None
            figures = self._figures
            message = (refreshed(assignment, figures) if figures else assignment).message()
            self._message = message
            self._assignment = self._figures = None
        return message

    # A replay compares each group's answers with the cycle before's, mostly
    # the very same object (a reused nomination's): not worded for that.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pending):
            return NotImplemented
        return self is other or (self.reason == other.reason and self.message == other.message)

    def __hash__(self) -> int:
        return hash((self.reason, self.message))

    def __repr__(self) -> str:
        return f"Pending(reason={self.reason!r}, message={self.message!r})"


def _pending_by_text(pending: Pending) -> tuple[type, tuple[str, str]]:
    return Pending, (pending.reason, pending.message)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class Preemption:
    victim: str
    preemptor: str
    reason: Reason
    cluster_queue: str
    message: str

    def __init__(
        self, victim: str, preemptor: str, reason: Reason, cluster_queue: str, message: str
    ) -> None:
        object.__setattr__(self, "victim", victim)
        object.__setattr__(self, "preemptor", preemptor)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "cluster_queue", cluster_queue)
        object.__setattr__(self, "message", message)


def told_as_before(before: dict[str, object], told: dict[str, Pending]) -> bool:
    """Whether each head in ``told`` was told the same in ``before``: the
    test of a stable cycle. A head left standing in a quiet tree is told
    with the very object it was told before: that is checked first, before
    any wording is compared. Dicts, not Mappings: compiled, a Mapping's
    ``get`` and ``items`` are method calls looked up by name."""
    for key, pending in told.items():
        was = before.get(key)
        if was is not pending and was != pending:
            return False
    return True


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class CycleResult:
    admitted: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    reserved: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    preempted: list[Preemption] = field(default_factory=list)
    evaluated: dict[str, Pending] = field(default_factory=dict)

    def __init__(
        self,
        admitted: dict[str, dict[str, dict[str, str]]] | None = None,
        reserved: dict[str, dict[str, dict[str, str]]] | None = None,
        preempted: list[Preemption] | None = None,
        evaluated: dict[str, Pending] | None = None,
    ) -> None:
        self.admitted = {} if admitted is None else admitted
        self.reserved = {} if reserved is None else reserved
        self.preempted = [] if preempted is None else preempted
        self.evaluated = {} if evaluated is None else evaluated

    @property
    def changed(self) -> bool:
        return bool(self.admitted or self.reserved or self.preempted)

    def merge(self, other: CycleResult) -> None:
        self.admitted.update(other.admitted)
        self.reserved.update(other.reserved)
        self.preempted.extend(other.preempted)
        self.evaluated.update(other.evaluated)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class Entry:
    workload: Workload
    queue: ClusterQueue
    assignment: Assignment | None
    targets: list[Target] = field(default_factory=list)
    pending: Pending | None = None  # set when the head is inadmissible before assignment
    # Why its assignment leaves it pending (no fit, or no victims), once worded.
    told: Pending | None = None
    # A reused nomination's quota figures read since its assignment was made,
    # not yet worded into it (assign.refreshed): a head left pending is told
    # with them (``Pending.worded``), worded only when read; a watch over
    # processing is given them worded in (``Scheduler._to_process``).
    figures: dict[FlavorResource, int] | None = None

    def __init__(
        self,
        workload: Workload,
        queue: ClusterQueue,
        assignment: Assignment | None,
        targets: list[Target] | None = None,
        pending: Pending | None = None,
        told: Pending | None = None,
        figures: dict[FlavorResource, int] | None = None,
    ) -> None:
        self.workload = workload
        self.queue = queue
        self.assignment = assignment
        self.targets = [] if targets is None else targets
        self.pending = pending
        self.told = told
        self.figures = figures

    def worded(self) -> Entry:
        """This entry with its ``figures`` worded into its assignment (itself
        when it has none)."""
        figures = self.figures
        if not figures:
            return self
        assert self.assignment is not None
        return Entry(self.workload, self.queue, refreshed(self.assignment, figures))


rebuilt_by_fields(Preemption)
copyreg.pickle(Pending, _pending_by_text)
