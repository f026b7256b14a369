"""The pending workloads of one ClusterQueue, as Kueue's queue manager keeps them.

A heap ordered by priority (higher first) then queue-order time (earlier first);
the "sticky" preemptor (a BestEffortFIFO head waiting for its victims) always
first. Under BestEffortFIFO a head that does not fit is parked as inadmissible,
together with every queued workload of the same shape (Kueue's scheduling
equivalence hash), until something that could free capacity happens in its
cohort tree. Under StrictFIFO it goes straight back and blocks the queue.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from queues.engine.model import QueueingStrategy, Workload

# Requeue reasons Kueue puts straight back in a BestEffortFIFO heap.
IMMEDIATE = frozenset({"FailedAfterNomination", "PendingPreemption"})


def scheduling_hash(workload: Workload) -> tuple[object, ...]:
    """Workloads equal under this key fail (or fit) together."""
    return (
        workload.priority,
        tuple(
            (
                p.name,
                p.count,
                tuple(sorted(p.requests.items())),
                tuple(sorted(p.node_selector.items())),
                p.tolerations,
            )
            for p in workload.pod_sets
        ),
    )


def order_key(workload: Workload) -> tuple[float, float, str]:
    return (-workload.priority, workload.queue_order_time, workload.key)


class PendingQueue:
    def __init__(self, name: str, strategy: QueueingStrategy) -> None:
        self.name = name
        self.strategy = strategy
        self._heap: list[tuple[tuple[float, float, str], str]] = []
        self._queued: dict[str, Workload] = {}  # in the heap (lazy deletion)
        self.parked: dict[str, Workload] = {}
        self._parked_hashes: set[tuple[object, ...]] = set()
        self.sticky: str | None = None

    def __len__(self) -> int:
        return len(self._queued) + len(self.parked)

    def __contains__(self, key: str) -> bool:
        return key in self._queued or key in self.parked

    def push(self, workload: Workload) -> None:
        """A new or returning pending workload."""
        if (
            self.strategy is QueueingStrategy.BEST_EFFORT_FIFO
            and scheduling_hash(workload) in self._parked_hashes
        ):
            self.parked[workload.key] = workload
            return
        self._queued[workload.key] = workload
        heapq.heappush(self._heap, (order_key(workload), workload.key))

    def remove(self, key: str) -> None:
        self._queued.pop(key, None)
        self.parked.pop(key, None)
        if self.sticky == key:
            self.sticky = None

    def pop(self) -> Workload | None:
        """The head, taken out for this cycle (requeue it afterwards)."""
        if self.sticky is not None and self.sticky in self._queued:
            return self._queued.pop(self.sticky)
        while self._heap:
            key_order, key = heapq.heappop(self._heap)
            workload = self._queued.get(key)
            if workload is not None and order_key(workload) == key_order:
                del self._queued[key]
                return workload
        return None

    def requeue(self, workload: Workload, reason: str) -> None:
        """Return an evaluated head: to the heap, or parked as inadmissible."""
        if reason == "PendingPreemption" and self.strategy is QueueingStrategy.BEST_EFFORT_FIFO:
            # First until admitted or removed, whatever happens to it meanwhile (a
            # later "no longer fits" skip included); another preemptor replaces it.
            self.sticky = workload.key
        if self.strategy is QueueingStrategy.STRICT_FIFO or reason in IMMEDIATE:
            self._queued[workload.key] = workload
            heapq.heappush(self._heap, (order_key(workload), workload.key))
            return
        self.parked[workload.key] = workload
        if reason in ("NoFit", "PreemptionNoCandidates"):
            shape = scheduling_hash(workload)
            self._parked_hashes.add(shape)
            for key, other in list(self._queued.items()):
                if scheduling_hash(other) == shape:
                    del self._queued[key]
                    self.parked[key] = other

    def unpark(self) -> int:
        """Something may have freed capacity: every parked workload queues again."""
        moved = len(self.parked)
        for workload in self.parked.values():
            self._queued[workload.key] = workload
            heapq.heappush(self._heap, (order_key(workload), workload.key))
        self.parked.clear()
        self._parked_hashes.clear()
        return moved

    def queued(self) -> Iterator[Workload]:
        """Queued (not parked) workloads in the order they would become head."""
        ordered = sorted(self._queued.values(), key=order_key)
        if self.sticky is not None and self.sticky in self._queued:
            ordered.sort(key=lambda w: w.key != self.sticky)
        return iter(ordered)

    def position(self, key: str) -> int | None:
        """1-based place among everything pending here (parked ones included, in
        priority order), or None."""
        if key not in self:
            return None
        everyone = sorted([*self._queued.values(), *self.parked.values()], key=order_key)
        if self.sticky is not None:
            everyone.sort(key=lambda w: w.key != self.sticky)
        return next(i for i, w in enumerate(everyone, start=1) if w.key == key)
