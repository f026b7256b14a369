"""The workloads of a replay yet to arrive, and each one's record once it has.

A month of workloads is most of a replay's memory, so they are not events on
the simulator's heap: they wait here in arrival order, read by a cursor, and
each is let go as it arrives (the scheduler holds it from then on). Its
record is made then; the result still lists every workload in the order given.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable

from mypy_extensions import mypyc_attr

from queues.engine.model import Workload
from queues.engine.replay_records import WorkloadRecord, gpu_count


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Arrivals:
    def __init__(self, workloads: Iterable[tuple[Workload, str]], context: set[str]) -> None:
        """``context`` names the workloads whose records are not measured
        (they only set the scene); the simulator's own set, shared."""
        self.context = context
        # Each workload's record from its arrival on (``all_records`` adds
        # the ones yet to arrive).
        self.records: dict[str, WorkloadRecord] = {}
        self._workloads: dict[str, Workload] = {}
        self._classes: dict[str, str] = {}
        for workload, workload_class in workloads:
            self._workloads[workload.key] = workload
            self._classes[workload.key] = workload_class
        self.total = len(self._workloads)
        # Every workload's key in the order given, records are listed so;
        # empty when that is the order they arrive in (begin), as a stream
        # sorted by creation time is: no million-key list kept to say so.
        self._keys = list(self._workloads)
        # Workloads yet to arrive, by arrival time (``begin`` fills it), and the
        # next one's place; an entry is None once it has arrived.
        self._due: list[tuple[float, Workload, str] | None] = []
        self._next = 0
        self.begun = False

    def given(self) -> Collection[Workload]:
        """The workloads given, before ``begin`` (none after)."""
        return self._workloads.values()

    def was_given(self, key: str) -> bool:
        """Whether a workload of that key was given (before ``begin``)."""
        return key in self._workloads

    def begin(self, floor: float) -> None:
        """Every workload on the clock, arriving at its creation time or at
        ``floor``, whichever is later. Arrivals at one time come in the order
        given."""
        if self.begun:
            raise RuntimeError("a replay begins once: call run() or begin() and advance()")
        self.begun = True
        self._due = [
            (max(workload.creation_time, floor), workload, self._classes[key])
            for key, workload in self._workloads.items()
        ]
        if any(
            later[0] < earlier[0]
            for earlier, later in itertools.pairwise(self._due)
            if earlier is not None and later is not None
        ):
            self._due.sort(key=lambda arrival: math.inf if arrival is None else arrival[0])
        else:
            self._keys = []
        self._next = 0
        self._workloads = {}
        self._classes = {}

    @property
    def pending(self) -> bool:
        """Whether some workload is yet to arrive."""
        return self._next < len(self._due)

    def next_time(self) -> float:
        """When the next workload arrives (infinity: none is left)."""
        if self._next < len(self._due):
            arrival = self._due[self._next]
            assert arrival is not None
            return arrival[0]
        return math.inf

    def arrive(self, now: float) -> Workload | None:
        """The next workload if it arrives at ``now``, its record made and its
        place let go; None when no more arrive then."""
        if self._next >= len(self._due):
            return None
        arrival = self._due[self._next]
        assert arrival is not None
        if arrival[0] != now:
            return None
        self._due[self._next] = None
        self._next += 1
        _, workload, workload_class = arrival
        self.records[workload.key] = self._record(workload, workload_class)
        return workload

    def _record(self, workload: Workload, workload_class: str) -> WorkloadRecord:
        return WorkloadRecord(
            workload.key,
            workload.cluster_queue,
            workload_class,
            workload.priority,
            workload.creation_time,
            gpu_count(workload),
            measured=workload.key not in self.context,
        )

    def all_records(self) -> dict[str, WorkloadRecord]:
        """Every workload's record, in the order the workloads were given:
        those yet to arrive (past the horizon, or a replay stopped early) as
        they were given, never admitted."""
        return self.records_due(None)

    def records_due(self, before: float | None) -> dict[str, WorkloadRecord]:
        """The records of what has arrived and of what was due to arrive
        before ``before`` (None: at any time) but was not replayed, in the
        order given; ``records`` itself when there are none of the latter."""
        records = self.records
        due = self._next
        while due < len(self._due):
            arrival = self._due[due]
            assert arrival is not None
            if before is not None and arrival[0] >= before:
                break
            if records is self.records:
                records = dict(records)
            records[arrival[1].key] = self._record(arrival[1], arrival[2])
            due += 1
        if not self._keys:
            return records  # arrived in the order given
        return {key: records[key] for key in self._keys if key in records}  # none before begin
