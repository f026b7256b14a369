"""What a capacity search will ask for next, so that workers can replay
ahead of it.

The search (``queues.engine.capacity_search.Search``) asks for one replay
at a time, and which it asks next depends on what the last one showed: a
gallop goes on up or turns, a bisection halves one side or the other, and a
capacity's other seeds are only needed when its first one holds. Workers
with nothing to do can still replay what the search may ask next: under
either answer of the replay it waits for (every target holds, or every
target fails), the search is run again from the start on what is known,
and what it then asks is queued behind it, breadth first. What the search
is given stays its own, each replay's true figures, so its answers, curve
and replay count are those of the search run alone; a replay run ahead and
never asked for only cost a worker's time.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Mapping

from queues.engine.capacity_search import Figures, Point, Request, Search


class _Unknown(Exception):
    """The search asked for a replay no one knows yet."""

    def __init__(self, point: Point) -> None:
        super().__init__(point)
        self.point = point


def _supposed(groups: Mapping[str, object], holds: bool) -> Figures:
    """A replay supposed to have every target hold (no wait at all), or every
    target fail (no wait that is more than a lower bound)."""
    return {
        group: {
            "wait": 0.0 if holds else None,
            "at_least": not holds,
            "workloads": 0,
            "never_admitted": 0,
        }
        for group in groups
    }


def asked_next(request: Request, known: Mapping[Point, Figures]) -> Point | None:
    """The replay the search asks for first that ``known`` has no figures
    of; None when it needs none (it is answered)."""

    def replayer(point: Point) -> Figures:
        if point not in known:
            raise _Unknown(point)
        return known[point]

    try:
        Search(copy.copy(request), replayer=replayer).run()
    except _Unknown as unknown:
        return unknown.point
    return None


def held(request: Request, figures: Figures) -> bool:
    """Whether every target held in one replay's figures."""
    for target in request.targets:
        wait = figures.get(target.group, {}).get("wait")
        if wait is None or figures[target.group].get("at_least") or wait > target.max_wait:
            return False
    return True


def likely_held(request: Request, known: Mapping[Point, Figures], point: Point) -> bool:
    """A guess at whether every target holds at ``point``: as it did at the
    nearest capacity of the same flavor known (the same capacity's other
    seeds first, then the fewest GPUs away, the larger on a tie); holds when
    none is known. A gallop tends to go on, and a capacity that held in one
    seed has its others asked for."""
    flavor, gpus, seed = point
    nearest = min(
        (
            (abs(g - gpus), g != gpus, -g, abs(s - seed), figures)
            for (f, g, s), figures in known.items()
            if f == flavor and (f, g, s) != point
        ),
        default=None,
        key=lambda entry: entry[:4],
    )
    return True if nearest is None else held(request, nearest[4])


def next_points(request: Request, known: Mapping[Point, Figures], limit: int) -> list[Point]:
    """Up to ``limit`` replays the search may ask for, most needed first: the
    one it asks for now given ``known``, then those it would ask for after
    it were every target to hold there or every target to fail (the likelier,
    ``likely_held``, first), and so on, breadth first. Empty when the search
    needs no replay more."""
    holds, fails = _supposed(request.groups, True), _supposed(request.groups, False)
    order: list[Point] = []
    branches: collections.deque[dict[Point, Figures]] = collections.deque([dict(known)])
    looked = 0
    # Each branch runs the search once; a branch that asks for a replay
    # already queued adds nothing new, so the looks are bounded too.
    while branches and len(order) < limit and looked < 4 * limit + 1:
        supposed = branches.popleft()
        looked += 1
        point = asked_next(request, supposed)
        if point is None:
            continue
        if point not in order:
            order.append(point)
        likelier, other = (
            (holds, fails) if likely_held(request, supposed, point) else (fails, holds)
        )
        branches.append({**supposed, point: likelier})
        branches.append({**supposed, point: other})
    return order
