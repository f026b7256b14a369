"""The simulator's timers give its events by time, then in the order they
were put in, exactly as the heap of (time, sequence, kind, payload) tuples
they replace did; a replay's results hang on that order (ties are common:
a workload's pods-ready and its check land at the same instant)."""

from __future__ import annotations

import heapq
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.engine.events import Timers


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("push"), st.sampled_from((0.0, 1.0, 1.5, 2.0, 7.25))),
            st.tuples(st.just("take"), st.just(0.0)),
        ),
        max_size=80,
    )
)
def test_timers_give_events_by_time_then_as_pushed(steps: list[tuple[str, float]]) -> None:
    timers = Timers()
    reference: list[tuple[float, int, str, int]] = []
    for index, (action, time) in enumerate(steps):
        if action == "push":
            timers.push(time, f"kind-{index % 3}", index)
            heapq.heappush(reference, (time, index, f"kind-{index % 3}", index))
        elif reference:
            expected = heapq.heappop(reference)
            timer = timers.take()
            assert (timer.time, timer.kind, timer.payload) == (
                expected[0],
                expected[2],
                expected[3],
            )
        assert timers.next_time() == (reference[0][0] if reference else math.inf)
        assert sorted((t, kind, payload) for t, _, kind, payload in timers.pending()) == sorted(
            (t, kind, payload) for t, _, kind, payload in reference
        )


def test_events_at_one_time_come_out_in_the_order_they_were_put_in() -> None:
    timers = Timers()
    for payload in ("first", "second", "third"):
        timers.push(5.0, "check", payload)
    timers.push(1.0, "finish", "earlier")
    assert [timers.take().payload for _ in range(4)] == ["earlier", "first", "second", "third"]
    assert timers.next_time() == math.inf and timers.pending() == []
