"""What happens on a replay's clock: the kinds of event ``Simulator`` keeps
(arrivals wait in ``Arrivals``, the rest in its ``Timers``).

Each kind is ``Final``: compiled, a constant, not a module global looked up
by name at every event (a replay handles millions).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queues.engine.heap_calls import heappop, heappush

ARRIVE: Final = "arrive"
FINISH: Final = "finish"
UNPARK: Final = "unpark"
CHECK: Final = "check"
RETRY: Final = "retry"
RELEASE: Final = "release"
TIMEOUT: Final = "timeout"
PODS_READY: Final = "pods-ready"
PODS_TIMEOUT: Final = "pods-timeout"
REQUEUE: Final = "requeue"
SAMPLE: Final = "sample"

# An event on the clock: (time, sequence, kind, payload).
Event = tuple[float, int, str, Any]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Timer:
    """One event to come: ordered by time, then by when it was put in."""

    def __init__(self, time: float, sequence: int, kind: str, payload: Any) -> None:
        self.time = time
        self.sequence = sequence
        self.kind = kind
        self.payload = payload

    def __lt__(self, other: Timer) -> bool:
        if self.time != other.time:
            return self.time < other.time
        return self.sequence < other.sequence


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Timers:
    """The events to come, taken by time, then in the order they were put
    in: a heap of records, rather than of event tuples, which compiled code
    unpacked at every look at the first and every pop (their type is a
    fixed-length tuple) and whose comparisons went item by item (a replay
    pushes and pops millions). The simulator reads ``heap[0].time`` itself
    at every event: a method call there would cost more than the look."""

    def __init__(self) -> None:
        self.heap: list[Timer] = []
        self.pushed = 0  # ties at a time: first pushed, first out

    def push(self, time: float, kind: str, payload: Any) -> None:
        self.pushed += 1
        heappush(self.heap, Timer(time, self.pushed, kind, payload))

    def next_time(self) -> float:
        """When the first event is due (infinity: there is none)."""
        return self.heap[0].time if self.heap else math.inf

    def take(self) -> Timer:
        """The first event due, taken out (there is one)."""
        return heappop(self.heap)

    def pending(self) -> list[Event]:
        """Every event still to come, in no order."""
        return [(t.time, t.sequence, t.kind, t.payload) for t in self.heap]
