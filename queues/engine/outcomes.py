"""What a scheduling cycle decides: admissions, reservations, preemptions and
why each evaluated head stays pending; and the head being decided (Entry).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from queues.engine.assign import Assignment
from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.model import ClusterQueue, Workload
from queues.engine.victim_search import Reason, Target


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class Pending:
    """Why a workload is not admitted: a stable code and Kueue-style text."""

    reason: str
    message: str

    # Stated, not generated: made by the million (see queues.engine.compiled).
    # Frozen, it sets its fields as the generated one would.
    def __init__(self, reason: str, message: str) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "message", message)


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

    def __init__(
        self,
        workload: Workload,
        queue: ClusterQueue,
        assignment: Assignment | None,
        targets: list[Target] | None = None,
        pending: Pending | None = None,
        told: Pending | None = None,
    ) -> None:
        self.workload = workload
        self.queue = queue
        self.assignment = assignment
        self.targets = [] if targets is None else targets
        self.pending = pending
        self.told = told


rebuilt_by_fields(Pending, Preemption)
