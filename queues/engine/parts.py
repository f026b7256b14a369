"""A split replay shared out among workers: its groups' replays (under one or
more policies: ``queues.engine.split.GroupReplay``) dealt into as many parts
as there are workers, balanced by cost, each part replayed by one worker,
its replays taken to each milestone one after another.

So that figures so far can be read while the parts run apart, every part
stops at the same simulated milestones (fixed fractions of the whole
replay's expected span) and hands over what its replays show there
(``Simulator.snapshot``); the figures at a milestone every part has passed
are those of the whole replay stopped there (``split.merge`` of the parts').
A part over before a milestone still hands over its figures there: its
replays read as of that time, as the whole replay's would be.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

from queues.engine.lockstep import advance_together, slice_width
from queues.engine.replay_records import Frame, SimulationResult
from queues.engine.scheduler import CycleResult
from queues.engine.simulator import Simulator
from queues.engine.split import GroupReplay

# Where the parts stop, as shares of the expected span: close together at first,
# so a first answer comes soon; a tenth apart after.
MILESTONES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
Key = TypeVar("Key", bound=Hashable)


def deal(sizes: Mapping[str, int], parts: int) -> list[list[str]]:
    """The groups dealt into at most ``parts`` parts by size (what replaying
    them costs, roughly), biggest group first to the lightest part so far; no
    part is empty. Parts come biggest first, their groups by name."""
    count = max(1, min(parts, len(sizes)))
    dealt: list[tuple[int, list[str]]] = [(0, []) for _ in range(count)]
    for group in sorted(sizes, key=lambda g: (-sizes[g], g)):
        lightest = min(range(count), key=lambda i: (dealt[i][0], i))
        load, members = dealt[lightest]
        dealt[lightest] = (load + sizes[group], [*members, group])
    ordered = sorted(dealt, key=lambda d: (-d[0], d[1]))
    return [sorted(members) for _, members in ordered if members]


def milestones(frame: Frame) -> list[float]:
    """The simulated times every part hands its figures so far over at."""
    span = frame.expected_end - frame.start
    if span <= 0:
        return []
    return [frame.start + span * share for share in MILESTONES]


def replay_part(
    replays: Mapping[Key, GroupReplay],
    frame: Frame,
    *,
    at_milestone: Callable[[int, float, dict[Key, SimulationResult]], None] | None = None,
    between: Callable[[float], None] | None = None,
    between_every: float = 1.0,
) -> dict[Key, SimulationResult]:
    """Each replay to its end, by key: to each milestone in turn, one replay
    after another, slice by slice. ``at_milestone`` gets (index, time,
    figures so far by key) at every milestone (``milestones(frame)``);
    ``between`` the share of the part done (0..1, never going back, 1.0 at
    the end) after every slice of every replay, and every ``between_every``
    seconds of wall time inside a slice that takes longer (one event time
    can hold a burst of arrivals and many cycles: a worker's heartbeat must
    not wait for it to end). The figures are live: send them before going
    on. The replays are spent: their simulators take their workloads
    (``GroupReplay.take_simulator``)."""
    simulators = {key: replay.take_simulator() for key, replay in replays.items()}
    for simulator in simulators.values():
        simulator.begin()
    width = slice_width(frame.start, frame.expected_end)
    at = frame.start
    progress = _Progress(list(simulators.values()), frame)
    if between is not None:
        _call_inside_slices(progress, between, between_every)
    for index, stop in enumerate([*milestones(frame), math.inf]):
        # Each replay on to the milestone before the next one starts, slice by
        # slice: one replay's state stays warm in the processor's caches. All
        # of them advanced a slice at a time took 7-10% longer
        # (docs/replay-scale-history.md).
        for place, simulator in enumerate(simulators.values()):
            mine = at
            while mine < stop and not simulator.done:
                mine = advance_together((simulator,), mine, width, stop)
                if between is not None:
                    between(progress.moved(place, over=simulator.done))
        at = stop  # where every replay not over now stands
        if at_milestone is not None and math.isfinite(stop):
            # Every milestone, even once this part is over: the run reads the
            # parts' figures at one milestone, each as of that time.
            at_milestone(
                index, stop, {key: s.snapshot(stop, clamp=False) for key, s in simulators.items()}
            )
    if between is not None:
        between(1.0)
    return {key: s.result() for key, s in simulators.items()}


class _Progress:
    """How far a part has come: each replay's share of the simulated span
    its clock has covered, or of its workloads finished when that is further
    (a replay without a horizon ends when its last workload does), weighed
    by its workloads. Its replays advance one after another, so their clocks
    stand apart; kept per replay, so that a reading after one replay moved
    costs that replay's figures, not every replay's (a part may hold hundreds
    of groups). Never 1.0 before the end, never going back."""

    def __init__(self, replays: list[Simulator], frame: Frame) -> None:
        self.replays = replays
        total = sum(s.total for s in replays)
        self.weights = [s.total / total if total else 1.0 / len(replays) for s in replays]
        self.shares = [0.0] * len(replays)
        self.start = frame.start
        self.span = max(frame.expected_end - frame.start, 1e-9)
        self.done = 0.0

    def moved(self, place: int, *, over: bool = False) -> float:
        """The share once the ``place``-th replay has moved, ``over`` once
        it has ended (a replay can end before its clock reaches the span's
        end, or with workloads that never finish: then all of it). Its clock
        and its finished workloads only grow, so the sum never goes back.
        Whether it is over is for the caller to say, between slices: between
        two cycles of one event time a replay with no timer left reads as
        done, until the next cycle admits a workload that will finish."""
        simulator = self.replays[place]
        if over:
            share = 1.0
        else:
            clock = min(1.0, max(0.0, (simulator.now - self.start) / self.span))
            finished = simulator.finished / simulator.total if simulator.total else 0.0
            share = max(clock, finished)
        self.done += self.weights[place] * (share - self.shares[place])
        self.shares[place] = share
        return min(0.99, self.done)


def _call_inside_slices(
    progress: _Progress, between: Callable[[float], None], every: float
) -> None:
    """``between`` after a cycle once ``every`` seconds have passed since it
    was last called from here."""
    last = [time.monotonic()]

    def after_cycle(place: int, _: CycleResult) -> None:
        now = time.monotonic()
        if now - last[0] < every:
            return
        last[0] = now
        between(progress.moved(place))

    for place, simulator in enumerate(progress.replays):
        simulator.after_cycle = functools.partial(after_cycle, place)


__all__ = ["MILESTONES", "deal", "milestones", "replay_part"]
