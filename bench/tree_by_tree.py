"""``bench/replay_scale.py``'s replay in one process, one independent cohort
tree after another (``queues.engine.split``), merged into the one result the
whole replay gives (``tests/engine/test_split.py``).

Why: a tree's replay touches only its own queues, heads and usage, but a
replay of all ten trees at once walks each event's tree between the other
nine's. On the project's machine the million replays in 185 s at once and in
132 s tree after tree, the same answers, while a replay of ten small trees
runs only 3.7% fewer instructions tree after tree (callgrind): the rest of
the difference we read as the caches', which hold one tree's state and not
ten's (``--together`` is the replay at once; ``docs/replay-scale-history.md``,
2026-12-07, afternoon). ``month_trace.generate`` makes each tree's workloads
together in memory, so that a tree replayed and let go frees whole blocks
for what comes after (made in arrival order, the freed room was scattered
among the other trees' workloads and the million's peak went past 1 GiB).

Pure engine: no Django, no database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from queues.engine.replay_records import SimulationResult
from queues.engine.simulator import Simulator
from queues.engine.split import GroupReplay, merge

# What replay_scale.py prints of each tree's settler and scheduler, summed.
SETTLER_COUNTS = (
    "changing_cycles",
    "telling_cycles",
    "confirming_cycles",
    "unparked_in_place",
    "cycles_in_place",
    "confirmed_unasked",
    "changing_seconds",
    "telling_seconds",
    "confirming_seconds",
)
SCHEDULER_COUNTS = (
    "reused",
    "refreshed",
    "read_after_own_usage_moved",
    "left_standing",
    "told_with_block",
    "told_over_ranges",
    "searches_told_over_ranges",
    "hopeless",
    "found_in_order",
    "hopeless_asked_again",
    "hopeless_as_used",
)


class Summed:
    """The trees' counts added up, read as one settler's or scheduler's."""

    def __init__(self, **counts: Any) -> None:
        self.__dict__.update(counts)


def _add(totals: dict[str, Any], part: Any, names: tuple[str, ...]) -> None:
    for name in names:
        totals[name] = totals.get(name, 0) + getattr(part, name)


def replay_trees(
    trees: dict[str, GroupReplay],
    *,
    timed: bool,
    started: float,
    check_memory: Callable[[], float],
    watch: Callable[[Simulator, str], None] | None = None,
) -> tuple[SimulationResult, Any, Any]:
    """Each tree (``split.group_replays``) replayed in turn (by name), its
    simulator let go once done, and the results merged; with the trees' settler and scheduler counts
    summed. Prints a line a tree; ``check_memory`` (the resident MiB, or it
    stops the run) is asked after each, and ``watch`` is given each tree's
    simulator (and name) before it runs."""
    results: dict[str, SimulationResult] = {}
    settler: dict[str, Any] = {"timed": timed}
    scheduler: dict[str, Any] = {"nominated": {}}
    names = sorted(trees)
    admissions = 0
    for index, name in enumerate(names, 1):
        count = len(trees[name].workloads)
        began = time.perf_counter()
        simulator = trees.pop(name).take_simulator()
        simulator.settler.timed = timed
        if watch is not None:
            watch(simulator, name)
        results[name] = simulator.run()
        took = time.perf_counter() - began
        _add(settler, simulator.settler, SETTLER_COUNTS)
        _add(scheduler, simulator.scheduler, SCHEDULER_COUNTS)
        for queue, nominated in simulator.scheduler.nominated.items():
            scheduler["nominated"][queue] = scheduler["nominated"].get(queue, 0) + nominated
        admissions += results[name].admissions
        # Its progress watch points back at it: let go of both now, not at
        # the next collection of cycles.
        simulator.progress = None
        del simulator
        rss = check_memory()
        print(
            f"  tree {name} ({index}/{len(names)}): {count:,} workloads in {took:.1f} s; "
            f"{admissions:,} admissions so far, {time.perf_counter() - started:.1f} s in all, "
            f"RSS {rss:,.0f} MiB",
            flush=True,
        )
    return merge(results), Summed(**settler), Summed(**scheduler)
