"""Replays of one stream under several policies, advanced together on the
simulated clock, so that figures so far compare like with like: every replay
has reached the same simulated time whenever they are read.

Reading them costs a summary of every record so far, so they are offered at
most every ``every`` seconds of wall time, and never more often than four
times what the last reading took: at a million workloads it stays a small
share of the replay.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping

from queues.engine.simulator import SimulationResult, Simulator

# Slices of simulated time the replays advance by between readings.
SLICES = 500


def replay_together(
    simulators: Mapping[str, Simulator],
    *,
    progress: Callable[[float], None] | None = None,
    so_far: Callable[[float], None] | None = None,
    every: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, SimulationResult]:
    """Each replay to its end, by label. ``progress`` gets the share done
    (0..1, never going back); ``so_far`` gets a simulated time every replay
    has reached and not passed (read them with ``Simulator.snapshot``)."""
    for simulator in simulators.values():
        simulator.begin()
    start = min(s.start for s in simulators.values())
    width = slice_width(start, max(s.expected_end for s in simulators.values()))
    at = start
    shown = 0.0
    last = clock()
    wait = every
    while not all(s.done for s in simulators.values()):
        at = advance_together(simulators.values(), at, width)
        share = min(_share(s, at) for s in simulators.values())
        if progress is not None and share > shown:
            shown = share
            progress(share)
        if (
            so_far is not None
            and clock() - last >= wait
            and not all(s.done for s in simulators.values())
        ):
            began = clock()
            so_far(at)
            last = clock()
            wait = max(every, 4 * (last - began))
    return {label: s.result() for label, s in simulators.items()}


def slice_width(start: float, expected_end: float) -> float:
    """How much simulated time one slice of a replay from ``start`` takes."""
    return max((expected_end - start) / SLICES, 1e-3)


def advance_together(
    simulators: Collection[Simulator], at: float, width: float, stop: float = math.inf
) -> float:
    """Every replay advanced by one slice from ``at``, or on to the soonest
    next event when that is further (no empty slices to walk through), never
    past ``stop``; returns the time they have all reached."""
    reached = min(stop, max(at + width, min(s.next_time for s in simulators)))
    for simulator in simulators:
        simulator.advance(reached)
    return reached


def _share(simulator: Simulator, at: float) -> float:
    """How far a replay has come: its window simulated, else its workloads
    finished (a replay without a horizon ends when the last one does)."""
    if simulator.done:
        return 1.0
    if simulator.horizon is not None:
        span = max(simulator.horizon - simulator.start, 1e-9)
        return min(1.0, max(0.0, (at - simulator.start) / span))
    return simulator.finished / simulator.total if simulator.total else 0.0


__all__ = ["SLICES", "advance_together", "replay_together", "slice_width"]
