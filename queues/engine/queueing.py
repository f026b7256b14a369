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

from collections.abc import Callable, Iterator
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queues.engine.heap_calls import bisect_left, heappop, heappush, insort
from queues.engine.model import QueueingStrategy, Workload

# Requeue reasons Kueue puts straight back in a BestEffortFIFO heap.
IMMEDIATE: Final = frozenset({"FailedAfterNomination", "PendingPreemption"})
# How many pod sets a queue remembers the bucket of (PendingQueue._shape_of).
SHAPES_BY_POD_SETS_KEPT: Final = 1024


def scheduling_hash(workload: Workload) -> tuple[object, ...]:
    """Workloads equal under this key fail (or fit) together."""
    return (
        workload.priority,
        tuple(
            (
                p.name,
                p.count,
                p.min_count,
                tuple(sorted(p.requests.items())),
                tuple(sorted(p.node_selector.items())),
                p.tolerations,
            )
            for p in workload.pod_sets
        ),
    )


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QueueBoard:
    """Which ClusterQueues may have a head to offer (``ready``) and which have
    parked work (``parking``), shared by a scheduler's queues so that a cycle
    visits the queues with something queued, not all of them. ``ready`` may
    name a queue whose pop finds nothing (the cycle drops it then);
    ``parking`` holds every queue with a parked shape or workload, and
    ``parking_in`` the same per cohort tree (``parked_among``): an unparking
    asks for its trees' only, and a busy month's other trees park dozens.

    ``epochs`` counts, per cohort tree (``root_of``; a queue on its own
    otherwise), the changes to what its queues hold: a workload queued, taken
    out or parked, parked work queued again. A head that goes back to where it
    was (StrictFIFO, or a BestEffortFIFO head Kueue requeues at once) is no
    change.

    ``ready_in`` holds ``ready`` again per independent group (``group_of``;
    a queue on its own otherwise), so a cycle in some groups visits only
    theirs: a replay cycles one group at a time."""

    def __init__(
        self, root_of: dict[str, str] | None = None, group_of: dict[str, str] | None = None
    ) -> None:
        self.ready: set[str] = set()
        self.ready_in: dict[str, set[str]] = {}
        # ready_in's groups by name, sorted when first asked, then kept in
        # order as queues come and go (a copy with one name put in or taken
        # out, not a sort of them all: a replay's cycles ask for the same
        # group's names again and again, and most cycles change them). Each
        # list is replaced, never changed in place: a cycle walks it while
        # its pops unmark queues.
        self._sorted_in: dict[str, list[str]] = {}
        self.parking: set[str] = set()
        self.parking_in: dict[str, set[str]] = {}
        # parking_in's trees by name, sorted when first asked and dropped when
        # their queues change (an unparking asks for one tree's, and parked
        # work comes and goes far less often). A list given out is never
        # changed: the caller walks it while its unparkings unmark queues.
        self._parked_sorted: dict[str, list[str]] = {}
        self.epochs: dict[str, int] = {}
        self._root_of = root_of or {}
        self._group_of = group_of or {}

    def mark_ready(self, queue: str) -> None:
        self.ready.add(queue)
        group = self._group_of.get(queue, queue)
        members = self.ready_in.get(group)
        if members is None:
            self.ready_in[group] = {queue}
            self._sorted_in.pop(group, None)
        elif queue not in members:
            members.add(queue)
            known = self._sorted_in.get(group)
            if known is not None:
                known = known.copy()
                insort(known, queue)
                self._sorted_in[group] = known

    def unmark_ready(self, queue: str) -> None:
        self.ready.discard(queue)
        group = self._group_of.get(queue, queue)
        members = self.ready_in.get(group)
        if members is not None and queue in members:
            members.discard(queue)
            known = self._sorted_in.get(group)
            if known is not None:
                known = known.copy()
                del known[bisect_left(known, queue)]
                self._sorted_in[group] = known

    def ready_among(self, groups: set[str] | None) -> list[str]:
        """The ready queues of ``groups`` (None: of all), by name. The list
        may be kept and given again: not to be changed."""
        if groups is None:
            return sorted(self.ready)
        if len(groups) == 1:
            (group,) = groups
            return _kept_sorted(self._sorted_in, self.ready_in, group)
        return _sorted_members(self.ready_in, groups)

    def changed(self, queue: str) -> None:
        root = self._root_of.get(queue, queue)
        self.epochs[root] = self.epochs.get(root, 0) + 1

    def mark_parking(self, queue: str) -> None:
        if queue in self.parking:
            return
        self.parking.add(queue)
        root = self._root_of.get(queue, queue)
        forget(self._parked_sorted, root)
        members = self.parking_in.get(root)
        if members is None:
            self.parking_in[root] = {queue}
        else:
            members.add(queue)

    def unmark_parking(self, queue: str) -> None:
        if queue not in self.parking:
            return
        self.parking.discard(queue)
        root = self._root_of.get(queue, queue)
        forget(self._parked_sorted, root)
        members = self.parking_in.get(root)
        if members is not None:
            members.discard(queue)

    def parked_among(self, roots: set[str]) -> list[str]:
        """The queues with parked work in those cohort trees, by name. The
        list may be kept and given again: not to be changed."""
        if len(roots) == 1:
            (root,) = roots
            return _kept_sorted(self._parked_sorted, self.parking_in, root)
        return _sorted_members(self.parking_in, roots)


def forget(table: dict[str, Any], key: str) -> None:
    """``table.pop(key, None)``, which compiled is a method call looked up
    by name: a replay does this for every workload, several times."""
    if key in table:
        del table[key]  # noqa: RUF051 - the point of this function


# The builtins, held in statics: compiled, ``next(...)`` and ``reversed(...)``
# are looked up on the builtins module at every call.
_next: Final = next
_reversed: Final = reversed


def last_put(held: dict[str, Workload]) -> Workload:
    """The workload put in ``held`` last (``held`` is not empty)."""
    return _next(_reversed(held.values()))


def _kept_sorted(kept: dict[str, list[str]], index: dict[str, set[str]], key: str) -> list[str]:
    """The members ``index`` holds under ``key``, by name, as ``kept`` holds
    them, sorted and kept there first if it does not."""
    known = kept.get(key)
    if known is None:
        known = sorted(index.get(key, ()))
        kept[key] = known
    return known


def _sorted_members(index: dict[str, set[str]], keys: set[str]) -> list[str]:
    """The queues ``index`` holds under any of ``keys``, by name."""
    names: list[str] = []
    for key in keys:
        members = index.get(key)
        if members:
            names.extend(members)
    names.sort()
    return names


# A workload's place in its queue: (-priority, queue order time, key).
# Declared variable-length so that compiled code keeps it as the tuple it is:
# as ``tuple[float, float, str]`` it is unpacked, its floats unboxed, at
# every heap pop, and packed anew at every push and every comparison with
# one looked up.
OrderKey = tuple[float | str, ...]


def order_key(workload: Workload) -> OrderKey:
    return (-workload.priority, workload.queue_order_time, workload.key)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class PendingQueue:
    """Pending workloads in buckets of one shape each (heap by order key), so
    parking or unparking a shape is one flag, not a move of every workload in it:
    Kueue's perf scenarios park and unpark hundreds of equal workloads per cycle.
    ``_heads`` holds, for every bucket that is not parked, an entry no later than
    its head; stale entries are skipped when they surface.

    A head popped from the heaps stays in its bucket until it is known to
    leave (``_out``): almost every head is requeued where it was, the
    StrictFIFO gang that waits most of all, cycle after cycle. Every other
    operation first takes it out for good (``_settle``), as popping it
    eagerly would have."""

    def __init__(
        self,
        name: str,
        strategy: QueueingStrategy,
        ranking: Callable[[Workload], float] | None = None,
        board: QueueBoard | None = None,
    ) -> None:
        self.name = name
        self.board = board if board is not None else QueueBoard()
        self.strategy = strategy
        # Admission fair sharing: a first sort key that changes over time (a
        # LocalQueue's usage), so heads are picked by a scan, not the heaps.
        self.ranking = ranking
        # Queued or parked, and the head popped last until it is settled (_out).
        self._workloads: dict[str, Workload] = {}
        self._shape: dict[str, int] = {}  # bucket of each workload in a bucket
        self._order: dict[str, OrderKey] = {}  # its live bucket entry
        self._buckets: dict[int, list[tuple[OrderKey, str]]] = {}
        self._members: dict[int, set[str]] = {}
        self._heads: list[tuple[OrderKey, int]] = []
        self._shape_ids: dict[tuple[object, ...], int] = {}
        self._known_shapes: dict[str, tuple[int, object, int]] = {}
        # By the id of pod sets a workload asked with: those pod sets, its
        # priority and its bucket (_shape_of).
        self._shape_by_pod_sets: dict[int, tuple[object, int, int]] = {}
        self._parked_shapes: set[int] = set()
        self._alone: dict[str, Workload] = {}  # parked on their own, in no bucket
        self.sticky: str | None = None
        # The head popped last, still in its bucket, its heads entry gone.
        self._out: str | None = None
        # A StrictFIFO head requeued where it was, while nothing else has
        # happened here since: what pop() would give again (see ``resting``).
        self._resting: Workload | None = None
        # What parked_heads() gave, while nothing has been queued, removed,
        # popped, parked or unparked here since: each unparking in a busy tree
        # asks every parked queue there, most of them unchanged since the last.
        self._parked_heads: list[Workload] | None = None
        self._parked_heads_known = False

    def __len__(self) -> int:
        self._settle()
        return len(self._workloads)

    def __contains__(self, key: str) -> bool:
        self._settle()
        return key in self._workloads

    # ------------------------------------------------------------ buckets

    def _shape_of(self, workload: Workload) -> int:
        """Its bucket, remembered while its priority and pod sets stay the same
        objects: a head goes back to its queue in every cycle it is not admitted."""
        known = self._known_shapes.get(workload.key)
        pod_sets = workload.pod_sets
        if known is not None and known[0] == workload.priority and known[1] is pod_sets:
            return known[2]
        # Workloads asking alike share their pod sets (model.shared_pod_sets):
        # a new one's bucket is its look-alikes', found without hashing what
        # they ask. The pod sets are held, so their id names no other.
        asked = self._shape_by_pod_sets.get(id(pod_sets))
        if asked is not None and asked[0] is pod_sets and asked[1] == workload.priority:
            shape = asked[2]
        else:
            shape = self._shape_ids.setdefault(scheduling_hash(workload), len(self._shape_ids))
            if len(self._shape_by_pod_sets) >= SHAPES_BY_POD_SETS_KEPT:
                self._shape_by_pod_sets.clear()  # pod sets not shared, or shapes without end
            self._shape_by_pod_sets[id(pod_sets)] = (pod_sets, workload.priority, shape)
        self._known_shapes[workload.key] = (workload.priority, pod_sets, shape)
        return shape

    def _enqueue(self, workload: Workload) -> None:
        key = workload.key
        shape = self._shape_of(workload)
        self._workloads[key] = workload
        self._shape[key] = shape
        members = self._members.get(shape)
        if members is None:
            self._members[shape] = {key}
        else:
            members.add(key)
        order = order_key(workload)
        if self._order.get(key) != order:
            self._order[key] = order
            bucket = self._buckets.get(shape)
            if bucket is None:
                self._buckets[shape] = [(order, key)]
            else:
                heappush(bucket, (order, key))
        if shape not in self._parked_shapes:
            heappush(self._heads, (order, shape))
            self.board.mark_ready(self.name)

    def _take(self, key: str) -> Workload | None:
        """Out of its bucket (its heap entry goes stale) and out of the queue.
        Looked up and deleted, not ``pop(key, None)`` (see ``forget``)."""
        workload = self._workloads.get(key)
        if workload is not None:
            del self._workloads[key]
        forget(self._alone, key)
        shape = self._shape.get(key)
        if shape is not None:
            del self._shape[key]
            self._members[shape].discard(key)
            forget(self._order, key)
        return workload

    def _head(self, shape: int) -> tuple[OrderKey, str] | None:
        # No default containers: a head is looked up at every pop, and compiled
        # code would build them at every call.
        bucket = self._buckets.get(shape)
        if not bucket:
            return None
        members = self._members.get(shape)
        while bucket:
            order, key = bucket[0]
            if members is not None and key in members and self._order.get(key) == order:
                return order, key
            heappop(bucket)
        return None

    def _settle(self) -> None:
        """The head popped last leaves its bucket, and the next one there
        gets its heads entry (a head popped for good)."""
        key = self._out
        if key is None:
            return
        self._out = None
        shape = self._shape.get(key)
        self._take(key)
        if shape is not None and shape not in self._parked_shapes:
            following = self._head(shape)
            if following is not None:
                heappush(self._heads, (following[0], shape))

    def _is_queued(self, key: str) -> bool:
        shape = self._shape.get(key)
        return shape is not None and shape not in self._parked_shapes

    # --------------------------------------------------------- operations

    @property
    def resting(self) -> Workload | None:
        """The StrictFIFO head requeued where it was, if nothing has been
        queued, removed, popped or unparked here since: the head pop() would
        give, left in place. A cycle may tell it it stays pending without
        popping and requeueing it (``Scheduler.cycle``)."""
        return self._resting

    def push(self, workload: Workload) -> None:
        """A new or returning pending workload (parked at once if its shape is)."""
        self._resting = None
        self._forget_parked_heads()
        self._settle()
        self._take(workload.key)  # its shape may have changed (priority)
        self._enqueue(workload)
        self.board.changed(self.name)

    def remove(self, key: str) -> None:
        self._resting = None
        self._forget_parked_heads()
        self._settle()
        self._take(key)
        self.board.changed(self.name)
        forget(self._known_shapes, key)
        if self.sticky == key:
            self.sticky = None

    def pop(self) -> Workload | None:
        """The head, out for this cycle (requeue or remove it afterwards): for
        every other operation it is no longer here."""
        self._resting = None
        self._forget_parked_heads()
        self._settle()
        if self.sticky is not None and self._is_queued(self.sticky):
            return self._take(self.sticky)
        if self.ranking is not None:
            return self._pop_ranked(self.ranking)
        workload = self._pop_head()
        if workload is None:
            self.board.unmark_ready(self.name)
        return workload

    def _pop_head(self) -> Workload | None:
        while self._heads:
            order, shape = heappop(self._heads)
            if shape in self._parked_shapes:
                continue
            head = self._head(shape)
            if head is None:
                continue
            if head[0] != order:
                heappush(self._heads, (head[0], shape))
                continue
            self._out = head[1]
            return self._workloads[head[1]]
        return None

    def _pop_ranked(self, ranking: Callable[[Workload], float]) -> Workload | None:
        queued = [w for key, w in self._workloads.items() if self._is_queued(key)]
        if not queued:
            self.board.unmark_ready(self.name)
            return None
        best = min(queued, key=lambda w: (ranking(w), order_key(w)))
        return self._take(best.key)

    def requeue(self, workload: Workload, reason: str) -> None:
        """Return an evaluated head: to the heap, or parked as inadmissible."""
        self._resting = None
        self._forget_parked_heads()
        back = False
        at_once = self.strategy is QueueingStrategy.STRICT_FIFO or reason in IMMEDIATE
        parks = not at_once and reason in ("NoFit", "PreemptionNoCandidates")
        shape = -1
        order: OrderKey | None = None
        if self._out == workload.key and (at_once or parks):
            shape = self._shape_of(workload)
            order = order_key(workload)
            back = shape == self._shape.get(workload.key) and self._order.get(workload.key) == order
        if back and parks:
            # Parked with its shape where it is, the head of its bucket as
            # before: taken out and queued again, it would be just that.
            self._out = None
            self.board.changed(self.name)
            self._parked_shapes.add(shape)
            self.board.mark_parking(self.name)
            return
        if not back:
            self._settle()
        if reason == "PendingPreemption" and self.strategy is QueueingStrategy.BEST_EFFORT_FIFO:
            # First until admitted or removed, whatever happens to it meanwhile (a
            # later "no longer fits" skip included); another preemptor replaces it.
            self.sticky = workload.key
            self.board.changed(self.name)
        if back:
            # Back where it was in its bucket, its queue still ready (pop found
            # it): only its heads entry was gone.
            assert order is not None
            self._out = None
            heappush(self._heads, (order, shape))
            if self.strategy is QueueingStrategy.STRICT_FIFO:
                self._resting = workload
            return
        if at_once:
            self._enqueue(workload)
            return
        self.board.changed(self.name)
        if reason in ("NoFit", "PreemptionNoCandidates"):
            # Every queued workload of its shape is parked with it.
            self._enqueue(workload)
            self._parked_shapes.add(self._shape[workload.key])
            self.board.mark_parking(self.name)
            return
        self._workloads[workload.key] = workload
        self._alone[workload.key] = workload
        self.board.mark_parking(self.name)

    def unpark(self) -> int:
        """Something may have freed capacity: every parked workload queues again."""
        self._resting = None
        self._forget_parked_heads()
        self._settle()
        moved = len(self._alone)
        self.board.unmark_parking(self.name)
        self.board.changed(self.name)
        for shape in self._parked_shapes:
            head = self._head(shape)
            if head is not None:
                moved += len(self._members[shape])
                heappush(self._heads, (head[0], shape))
                self.board.mark_ready(self.name)
        self._parked_shapes.clear()
        for workload in list(self._alone.values()):
            del self._alone[workload.key]
            self._enqueue(workload)
        return moved

    def parked_heads(self) -> list[Workload] | None:
        """The head of each parked shape, in the order the cycles after an
        unparking would pop them, when they are all it would offer then: a
        BestEffortFIFO queue with nothing else queued, nothing parked on its
        own, no preemptor first and no ranking. None otherwise. The list may
        be kept and given again: not to be changed."""
        self._settle()
        if not self._parked_heads_known:
            self._parked_heads = self._find_parked_heads()
            self._parked_heads_known = True
        return self._parked_heads

    def _forget_parked_heads(self) -> None:
        # The list goes too: it would keep workloads gone since alive.
        self._parked_heads = None
        self._parked_heads_known = False

    def _find_parked_heads(self) -> list[Workload] | None:
        if (
            self.strategy is not QueueingStrategy.BEST_EFFORT_FIFO
            or self.ranking is not None
            or self.sticky is not None
            or self._alone
        ):
            return None
        heads: list[tuple[OrderKey, str]] = []
        for shape, members in self._members.items():
            if not members:
                continue
            if shape not in self._parked_shapes:
                return None  # queued, not parked
            head = self._head(shape)
            if head is not None:
                heads.append(head)
        heads.sort()
        return [self._workloads[key] for _, key in heads]

    @property
    def has_parked(self) -> bool:
        self._settle()
        return bool(self._alone) or any(self._members.get(s) for s in self._parked_shapes)

    @property
    def parked(self) -> dict[str, Workload]:
        """Every parked workload, by key."""
        self._settle()
        parked = dict(self._alone)
        for shape in self._parked_shapes:
            for key in self._members.get(shape, ()):
                parked[key] = self._workloads[key]
        return parked

    def queued(self) -> Iterator[Workload]:
        """Queued (not parked) workloads in the order they would become head."""
        self._settle()
        ordered = sorted(
            (w for key, w in self._workloads.items() if self._is_queued(key)), key=order_key
        )
        if self.sticky is not None and self._is_queued(self.sticky):
            ordered.sort(key=lambda w: w.key != self.sticky)
        return iter(ordered)

    def position(self, key: str) -> int | None:
        """1-based place among everything pending here (parked ones included, in
        priority order), or None."""
        if key not in self:
            return None
        everyone = sorted(self._workloads.values(), key=order_key)
        if self.sticky is not None:
            everyone.sort(key=lambda w: w.key != self.sticky)
        return next(i for i, w in enumerate(everyone, start=1) if w.key == key)
