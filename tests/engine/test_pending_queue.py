"""The pending queue keeps workloads in one bucket per shape so that parking a
shape is cheap; it must behave exactly like the plain model Kueue describes:
a heap by (priority, time), a sticky preemptor first, a NoFit head parked with
every queued workload of its shape, newcomers of a parked shape parked at once,
everything back on unpark. Checked against that plain model on random runs,
with heads requeued, admitted, or requeued after another workload arrived
(a popped head stays in its bucket until it is known to leave)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.engine.model import PodSet, QueueingStrategy, Workload
from queues.engine.queueing import (
    IMMEDIATE,
    PendingQueue,
    QueueBoard,
    order_key,
    scheduling_hash,
)

REASONS = ("NoFit", "PreemptionNoCandidates", "PendingPreemption", "Pending", "Other")


class PlainQueue:
    """The reference: lists and sorting, no buckets, no lazy deletion."""

    def __init__(self, strategy: QueueingStrategy) -> None:
        self.strategy = strategy
        self.queued: dict[str, Workload] = {}
        self.parked: dict[str, Workload] = {}
        self.parked_shapes: set[tuple[object, ...]] = set()
        self.alone: set[str] = set()  # parked on their own, not with their shape
        self.sticky: str | None = None

    def push(self, workload: Workload) -> None:
        self.queued.pop(workload.key, None)
        self.parked.pop(workload.key, None)
        self.alone.discard(workload.key)
        if scheduling_hash(workload) in self.parked_shapes:
            self.parked[workload.key] = workload
        else:
            self.queued[workload.key] = workload

    def remove(self, key: str) -> None:
        self.queued.pop(key, None)
        self.parked.pop(key, None)
        self.alone.discard(key)
        if self.sticky == key:
            self.sticky = None

    def pop(self) -> Workload | None:
        if self.sticky in self.queued:
            return self.queued.pop(self.sticky)
        if not self.queued:
            return None
        head = min(self.queued.values(), key=order_key)
        return self.queued.pop(head.key)

    def requeue(self, workload: Workload, reason: str) -> None:
        best_effort = self.strategy is QueueingStrategy.BEST_EFFORT_FIFO
        if reason == "PendingPreemption" and best_effort:
            self.sticky = workload.key
        if not best_effort or reason in IMMEDIATE:
            self.queued[workload.key] = workload
            return
        self.parked[workload.key] = workload
        if reason in ("NoFit", "PreemptionNoCandidates"):
            shape = scheduling_hash(workload)
            self.parked_shapes.add(shape)
            for key, other in list(self.queued.items()):
                if scheduling_hash(other) == shape:
                    self.parked[key] = self.queued.pop(key)
        else:
            self.alone.add(workload.key)

    def unpark(self) -> int:
        moved = len(self.parked)
        self.queued.update(self.parked)
        self.parked.clear()
        self.parked_shapes.clear()
        self.alone.clear()
        return moved

    def parked_heads(self) -> list[str] | None:
        """The first of each parked shape, in order, when a BestEffortFIFO
        queue holds nothing else: no sticky preemptor, nothing queued,
        nothing parked on its own."""
        if (
            self.strategy is not QueueingStrategy.BEST_EFFORT_FIFO
            or self.sticky is not None
            or self.queued
            or self.alone
        ):
            return None
        first: dict[tuple[object, ...], Workload] = {}
        for workload in self.parked.values():
            shape = scheduling_hash(workload)
            if shape not in first or order_key(workload) < order_key(first[shape]):
                first[shape] = workload
        return [w.key for w in sorted(first.values(), key=order_key)]


def _keys(workloads: list[Workload] | None) -> list[str] | None:
    return None if workloads is None else [w.key for w in workloads]


def _workload(index: int, shape: int, priority: int, time: float) -> Workload:
    return Workload(
        f"w{index}",
        "cq",
        (PodSet("main", 1, {"cpu": shape + 1}),),
        priority=priority,
        creation_time=time,
    )


operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("push"),
            st.integers(0, 2),  # shape
            st.sampled_from([0, 10]),  # priority
            st.integers(0, 5),  # creation time (ties broken by key)
        ),
        st.tuples(st.just("cycle"), st.sampled_from(REASONS)),
        # The parked heads asked for while the head is out (as an unparking
        # may ask between a pop and its requeue): it leaves its bucket then.
        st.tuples(st.just("cycle-look"), st.sampled_from(REASONS)),
        # Its time in the queue changed while it was out (a requeue with a new
        # queued_at), then requeued.
        st.tuples(st.just("cycle-retime"), st.sampled_from(REASONS), st.integers(0, 6)),
        # The head admitted: removed after it was popped.
        st.tuples(st.just("admit")),
        # Another workload arrives (an evicted one, say) while the head is out.
        st.tuples(
            st.just("cycle-push"),
            st.sampled_from(REASONS),
            st.integers(0, 2),
            st.sampled_from([0, 10]),
            st.integers(0, 5),
        ),
        st.tuples(st.just("remove"), st.integers(0, 25)),
        st.tuples(st.just("unpark")),
    ),
    max_size=60,
)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(list(QueueingStrategy)), operations)
def test_the_bucketed_queue_behaves_like_the_plain_one(
    strategy: QueueingStrategy, steps: list[tuple[Any, ...]]
) -> None:
    real, plain = PendingQueue("cq", strategy), PlainQueue(strategy)
    made = 0
    for step in steps:
        # A quiet cohort tree's cycle is skipped while its queues' epoch stands
        # still: a step that leaves the epoch where it was changed nothing queued.
        epoch = real.board.epochs.get("cq", 0)
        held = (dict(plain.queued), dict(plain.parked), plain.sticky)
        if step[0] == "push":
            workload = _workload(made, step[1], step[2], float(step[3]))
            made += 1
            real.push(workload)
            plain.push(workload)
        elif step[0] == "cycle":
            head, expected = real.pop(), plain.pop()
            assert (head and head.key) == (expected and expected.key)
            if head is not None:
                real.requeue(head, step[1])
                plain.requeue(head, step[1])
        elif step[0] == "cycle-look":
            head, expected = real.pop(), plain.pop()
            assert (head and head.key) == (expected and expected.key)
            assert _keys(real.parked_heads()) == plain.parked_heads()
            if head is not None:
                real.requeue(head, step[1])
                plain.requeue(head, step[1])
        elif step[0] == "cycle-retime":
            head, expected = real.pop(), plain.pop()
            assert (head and head.key) == (expected and expected.key)
            if head is not None:
                head.queued_at = float(step[2])
                real.requeue(head, step[1])
                plain.requeue(head, step[1])
        elif step[0] == "admit":
            head, expected = real.pop(), plain.pop()
            assert (head and head.key) == (expected and expected.key)
            if head is not None:
                real.remove(head.key)
                plain.remove(head.key)
        elif step[0] == "cycle-push":
            head, expected = real.pop(), plain.pop()
            assert (head and head.key) == (expected and expected.key)
            workload = _workload(made, step[2], step[3], float(step[4]))
            made += 1
            real.push(workload)
            plain.push(workload)
            if head is not None:
                real.requeue(head, step[1])
                plain.requeue(head, step[1])
        elif step[0] == "remove":
            key = f"default/w{step[1]}"  # a workload's key is namespace/name
            real.remove(key)
            plain.remove(key)
        else:
            assert real.unpark() == plain.unpark()
        assert set(real.parked) == set(plain.parked)
        assert real.has_parked == bool(plain.parked)
        if real.board.epochs.get("cq", 0) == epoch:
            assert (plain.queued, plain.parked, plain.sticky) == held
        # The scheduler's cycle visits only queues on the board: one with
        # something queued must be there, and one with parked work in parking.
        if plain.queued:
            assert "cq" in real.board.ready
            assert real.board.ready_among({"cq"}) == ["cq"]  # a queue on its own: its own group
        if plain.parked:
            assert "cq" in real.board.parking
        # Kept between steps that change nothing here (an unparking asks
        # again and again), and forgotten at any that does.
        assert _keys(real.parked_heads()) == plain.parked_heads()
        assert real.board.parked_among({"cq"}) == sorted(real.board.parking)
        assert len(real) == len(plain.queued) + len(plain.parked)
        expected_order = sorted(plain.queued.values(), key=order_key)
        expected_order.sort(key=lambda w: w.key != plain.sticky)
        assert [w.key for w in real.queued()] == [w.key for w in expected_order]
    # Drain: the same order to the end.
    real.unpark()
    plain.unpark()
    while True:
        head, expected = real.pop(), plain.pop()
        assert (head and head.key) == (expected and expected.key)
        if head is None:
            break


def test_a_cycle_in_some_groups_visits_only_their_ready_queues() -> None:
    group_of = {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}
    board = QueueBoard(group_of=group_of)
    queues = {
        name: PendingQueue(name, QueueingStrategy.STRICT_FIFO, board=board) for name in group_of
    }
    for name in ("a2", "b1", "a1", "c1"):
        queues[name].push(Workload(f"w-{name}", name, (PodSet("main", 1, {"cpu": 1000}),)))
    assert board.ready_among({"A"}) == ["a1", "a2"]
    assert board.ready_among({"A", "C"}) == ["a1", "a2", "c1"]
    assert board.ready_among(None) == ["a1", "a2", "b1", "c1"]
    queues["a1"].pop()
    queues["a1"].pop()  # nothing left there: off the board
    assert board.ready_among({"A"}) == ["a2"] and board.ready_among(set()) == []


def test_a_groups_names_given_out_stay_as_given_while_its_queues_come_and_go() -> None:
    """A cycle walks the names while its pops take queues off the board; the
    names are kept between cycles, and after a change given as a new list."""
    group_of = {"a1": "A", "a2": "A", "a3": "A"}
    board = QueueBoard(group_of=group_of)
    queues = {
        name: PendingQueue(name, QueueingStrategy.STRICT_FIFO, board=board) for name in group_of
    }
    for name in ("a3", "a1"):
        queues[name].push(Workload(f"w-{name}", name, (PodSet("main", 1, {"cpu": 1000}),)))
    walked = board.ready_among({"A"})
    assert walked == ["a1", "a3"]
    assert board.ready_among({"A"}) is walked  # nothing changed: not sorted again
    queues["a1"].pop()
    queues["a1"].pop()  # off the board
    assert walked == ["a1", "a3"]
    assert board.ready_among({"A"}) == ["a3"]
    queues["a2"].push(Workload("w-a2", "a2", (PodSet("main", 1, {"cpu": 1000}),)))
    assert board.ready_among({"A"}) == ["a2", "a3"]
    queues["a3"].push(Workload("w-a3b", "a3", (PodSet("main", 1, {"cpu": 1000}),)))
    assert board.ready_among({"A"}) == ["a2", "a3"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(("mark", "unmark", "ask")), st.integers(0, 7)),
        max_size=60,
    )
)
def test_a_groups_names_stay_in_order_as_its_queues_come_and_go(
    steps: list[tuple[str, int]],
) -> None:
    """Once asked, a group's names are kept in order by putting a name in or
    taking it out, not by sorting them again: after any run of comings and
    goings they are the ready queues of the group, sorted, and a list given
    out before is as it was given."""
    names = [f"q{i}" for i in (3, 0, 7, 1, 6, 2, 5, 4)]
    board = QueueBoard(group_of=dict.fromkeys(names, "G"))
    given_out: list[tuple[list[str], list[str]]] = []
    for action, index in steps:
        name = names[index]
        if action == "mark":
            board.mark_ready(name)
        elif action == "unmark":
            board.unmark_ready(name)
        else:
            walked = board.ready_among({"G"})
            given_out.append((walked, list(walked)))
        assert board.ready_among({"G"}) == sorted(board.ready_in.get("G", ()))
    for walked, as_given in given_out:
        assert walked == as_given


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(("mark", "unmark", "ask", "ask-both")), st.integers(0, 7)),
        max_size=60,
    )
)
def test_a_trees_parked_queues_stay_as_they_are_as_its_queues_come_and_go(
    steps: list[tuple[str, int]],
) -> None:
    """A tree's queues with parked work are kept once asked (an unparking
    asks for one tree's, again and again) and worked out again after any
    change there: after any run of comings and goings they are the tree's
    parking queues, sorted, another tree's changes leave them as they were,
    and a list given out before is as it was given."""
    names = [f"q{i}" for i in (3, 0, 7, 1, 6, 2, 5, 4)]
    root_of = {name: "R" if int(name[1:]) % 2 else "S" for name in names}
    board = QueueBoard(root_of=root_of)
    given_out: list[tuple[list[str], list[str]]] = []
    for action, index in steps:
        name = names[index]
        if action == "mark":
            board.mark_parking(name)
        elif action == "unmark":
            board.unmark_parking(name)
        elif action == "ask":
            walked = board.parked_among({root_of[name]})
            given_out.append((walked, list(walked)))
        else:
            assert board.parked_among({"R", "S"}) == sorted(board.parking)
        for root in ("R", "S"):
            expected = sorted(n for n in board.parking if root_of[n] == root)
            assert board.parked_among({root}) == expected
    for walked, as_given in given_out:
        assert walked == as_given


def test_a_head_requeued_with_a_new_time_takes_its_new_place() -> None:
    """A popped head stays in its bucket while it is out; requeued with a
    different queue time, it must move, and the next of its bucket must be
    among the queue's heads again (found by a review: the fast path once
    checked only the shape)."""
    queue = PendingQueue("cq", QueueingStrategy.BEST_EFFORT_FIFO)
    a, f, g = _workload(0, 0, 0, 0.0), _workload(1, 0, 0, 2.0), _workload(2, 1, 0, 3.0)
    for workload in (a, f, g):
        queue.push(workload)
    head = queue.pop()
    assert head is a
    queue.requeue(a, "NoFit")  # its shape, f's too, parked
    head = queue.pop()
    assert head is g
    queue.requeue(g, "FailedAfterNomination")
    queue.unpark()
    head = queue.pop()
    assert head is a
    a.queued_at = 5.0
    queue.requeue(a, "FailedAfterNomination")
    assert queue.pop() is f


def test_a_head_parked_where_it_stands_is_first_of_its_shape_again_once_unparked() -> None:
    """A BestEffortFIFO head that does not fit is parked with its shape
    where it stands in its bucket, not taken out and queued again (which
    left an entry for it among the queue's heads), and once unparked it is
    the first of its shape again, ahead of what arrived meanwhile; one whose
    queue time moved while out goes the long way, to its new place."""
    queue = PendingQueue("cq", QueueingStrategy.BEST_EFFORT_FIFO)
    a, b = _workload(0, 0, 0, 0.0), _workload(1, 0, 0, 1.0)
    queue.push(a)
    queue.push(b)
    assert queue.pop() is a
    entries = len(queue._heads)
    queue.requeue(a, "NoFit")
    assert set(queue.parked) == {a.key, b.key}
    assert len(queue._heads) == entries  # none for a parked shape
    assert queue.pop() is None
    c = _workload(2, 0, 0, 0.5)
    queue.push(c)  # parked at once: its shape is
    queue.unpark()
    assert queue.pop() is a
    a.queued_at = 3.0
    queue.requeue(a, "NoFit")
    queue.unpark()
    assert [w.name for w in queue.queued()] == ["w2", "w1", "w0"]
