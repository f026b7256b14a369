"""``bench/replay_scale.py``'s replay one independent cohort tree after
another (``queues.engine.split``), merged into the one result the whole
replay gives (``tests/engine/test_split.py``): in one process
(``replay_trees``), or shared out among forked worker processes, each
replaying the next tree, biggest first, once it is free
(``replay_trees_in_processes``, ``--workers N``); or as one what-if part
replays its groups (``replay_as_part``, ``--as-part``).

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

A worker reads its trees from the memory it forked with, so only a tree's
name goes to it; its result comes back as columns (``result_codec.to_columns``):
pickled as records, a tree's result kept the worker from its next tree for
about a second. Before, the parent built every tree's simulator before it
forked, and itself peaked at about 1.4 GiB on the million.

Pure engine: no Django, no database.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import queue
import resource
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from month_trace import DAY

from queues.engine.parts import milestones, replay_part
from queues.engine.replay_records import Frame, SimulationResult
from queues.engine.result_codec import from_columns, to_columns
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


def tree_counts(simulator: Simulator) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tree's settler and scheduler counts, as plain dicts (a worker
    process sends them back with the tree's result)."""
    settler = {name: getattr(simulator.settler, name) for name in SETTLER_COUNTS}
    scheduler = {name: getattr(simulator.scheduler, name) for name in SCHEDULER_COUNTS}
    scheduler["nominated"] = dict(simulator.scheduler.nominated)
    return settler, scheduler


class Totals:
    """The trees' counts (``tree_counts``), summed as they come in."""

    def __init__(self, timed: bool) -> None:
        self.settler: dict[str, Any] = {"timed": timed}
        self.scheduler: dict[str, Any] = {"nominated": {}}

    def add(self, settler: dict[str, Any], scheduler: dict[str, Any]) -> None:
        for name in SETTLER_COUNTS:
            self.settler[name] = self.settler.get(name, 0) + settler[name]
        for name in SCHEDULER_COUNTS:
            self.scheduler[name] = self.scheduler.get(name, 0) + scheduler[name]
        nominated = self.scheduler["nominated"]
        for cluster_queue, count in scheduler["nominated"].items():
            nominated[cluster_queue] = nominated.get(cluster_queue, 0) + count

    def summed(self) -> tuple[Summed, Summed]:
        return Summed(**self.settler), Summed(**self.scheduler)


def _replay_tree(
    tree: GroupReplay,
    timed: bool,
    watch: Callable[[Simulator], None] | None,
    measure: Callable[[], float | None] | None = None,
) -> tuple[SimulationResult, float, tuple[dict[str, Any], dict[str, Any]], float | None]:
    """One tree's replay on a simulator of its own, let go once done: its
    result, seconds, counts, and what ``measure`` read at its end, the
    simulator still held."""
    began = time.perf_counter()
    simulator = tree.take_simulator()
    simulator.settler.timed = timed
    if watch is not None:
        watch(simulator)
    result = simulator.run()
    took = time.perf_counter() - began
    counts = tree_counts(simulator)
    measured = None if measure is None else measure()
    # Its progress watch points back at it: let go of both now, not at
    # the next collection of cycles.
    simulator.progress = None
    return result, took, counts, measured


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
    totals = Totals(timed)
    names = sorted(trees)
    admissions = 0
    for index, name in enumerate(names, 1):
        count = len(trees[name].workloads)
        tree_watch = _named(watch, name)
        results[name], took, counts, _ = _replay_tree(trees.pop(name), timed, tree_watch)
        totals.add(*counts)
        admissions += results[name].admissions
        rss = check_memory()
        print(
            f"  tree {name} ({index}/{len(names)}): {count:,} workloads in {took:.1f} s; "
            f"{admissions:,} admissions so far, {time.perf_counter() - started:.1f} s in all, "
            f"RSS {rss:,.0f} MiB",
            flush=True,
        )
    return (merge(results), *totals.summed())


def say(line: str) -> None:
    """``line`` printed in one write: worker processes print beside this
    one, and unbuffered (``PYTHONUNBUFFERED``) ``print`` writes the line and
    its newline apart, so lines from two processes could run together."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _watch_named(watch: Callable[[Simulator, str], None], name: str, tree: Simulator) -> None:
    watch(tree, name)


def _named(
    watch: Callable[[Simulator, str], None] | None, name: str
) -> Callable[[Simulator], None] | None:
    """The watch told each tree's simulator with that tree's name."""
    return None if watch is None else functools.partial(_watch_named, watch, name)


class _WorkerSetUp:
    """What the worker processes read from the memory they fork with: the
    trees, so that only a tree's name goes to a worker, the memory check,
    and the watch given each tree's simulator."""

    trees: dict[str, GroupReplay]
    check_memory: Callable[[], float]
    watch: Callable[[Simulator, str], None] | None

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.trees = {}
        self.check_memory = lambda: 0.0
        self.watch = None


_SET_UP = _WorkerSetUp()


class TreeBack:
    """What a worker sends back of one tree: its result as columns
    (``result_codec.to_columns``), seconds, counts (``tree_counts``), the
    worker's pid and its own memory at the tree's end (``own_mib``)."""

    def __init__(
        self,
        name: str,
        packed: tuple[SimulationResult, list[list[Any]]],
        took: float,
        counts: tuple[dict[str, Any], dict[str, Any]],
        own: float | None,
    ) -> None:
        self.name = name
        self.packed = packed
        self.took = took
        self.counts = counts
        self.pid = os.getpid()
        self.own = own


def _replay_tree_in_worker(name: str, timed: bool) -> TreeBack:
    """One tree replayed in a worker, its memory measured before the
    simulator is let go and checked against the cap after."""
    say(f"  tree {name} begun in worker {os.getpid()}")
    tree = _SET_UP.trees.pop(name)
    tree_watch = _named(_SET_UP.watch, name)
    result, took, counts, own = _replay_tree(tree, timed, tree_watch, own_mib)
    _SET_UP.check_memory()
    return TreeBack(name, to_columns(result), took, counts, own)


def own_mib() -> float | None:
    """This process's own memory now: the pages no other process maps
    (``Private_*`` in smaps_rollup). For a forked worker these are the pages
    it has written since the fork, and those its parent or a sibling has
    let go of or written since. None where Linux does not say."""
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return None
    kib = sum(int(line.split()[1]) for line in lines if line.startswith("Private_"))
    return kib / 1024


def replay_trees_in_processes(
    trees: dict[str, GroupReplay],
    workers: int,
    *,
    timed: bool,
    started: float,
    check_memory: Callable[[], float],
    watch: Callable[[Simulator, str], None] | None = None,
) -> tuple[SimulationResult, Any, Any]:
    """The trees replayed in ``workers`` forked processes, biggest first,
    each worker taking the next tree once it is free and replaying it as
    ``replay_trees`` does (a simulator of its own, made in the worker and let
    go once done, ``check_memory`` asked after it); the results merged and
    the counts summed in the trees' order, as there. The trees are emptied
    here: this process lets go of its copies once the workers have forked.
    Prints a line a tree as it begins and as it comes back, and what the
    workers held. A tree that fails stops the replay: the trees not begun
    are cancelled and the workers ended."""
    _SET_UP.trees = dict(trees)
    _SET_UP.check_memory = check_memory
    _SET_UP.watch = watch
    trees.clear()
    sizes = {name: len(tree.workloads) for name, tree in _SET_UP.trees.items()}
    order = sorted(sizes, key=lambda name: (-sizes[name], name))
    kind = "tree" if len(order) == 1 else "trees"
    say(f"  {len(order)} independent cohort {kind}, biggest first, in {workers} worker process(es)")
    results: dict[str, SimulationResult] = {}
    counts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    most_own: float | None = None
    # The workers' collections need not walk what they inherit (nor copy
    # each page they would walk).
    gc.freeze()
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            # Each tree's future handed over once done, and held nowhere else:
            # a list of them would keep every tree's columns to the end.
            done: queue.SimpleQueue[Future[TreeBack]] = queue.SimpleQueue()
            for name in order:
                pool.submit(_replay_tree_in_worker, name, timed).add_done_callback(done.put)
            # With fork, CPython's executor forks every worker at the first
            # submission: they hold their own copies now.
            _SET_UP.trees.clear()
            try:
                for index in range(1, len(order) + 1):
                    back = done.get().result()
                    results[back.name] = from_columns(*back.packed)
                    counts[back.name] = back.counts
                    if back.own is not None:
                        most_own = max(back.own, most_own or 0.0)
                    say(
                        f"  tree {back.name} ({index}/{len(order)}, worker {back.pid}): "
                        f"{sizes[back.name]:,} workloads in {back.took:.1f} s; "
                        f"back at {time.perf_counter() - started:.1f} s"
                    )
                    del back
            except BaseException:
                # Leaving the block would wait for every tree still queued.
                pool.shutdown(wait=False, cancel_futures=True)
                for child in multiprocessing.active_children():
                    child.terminate()
                raise
    finally:
        gc.unfreeze()
        _SET_UP.clear()
    merging = time.perf_counter()
    merged = merge(results)
    totals = Totals(timed)
    for name in sorted(counts):  # as one process adds them: a tie prints alike
        totals.add(*counts[name])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    own = (
        ""
        if most_own is None
        else f"; a worker's own memory (pages no other process maps) at most "
        f"{most_own:,.0f} MiB at a tree's end"
    )
    print(
        f"  merged in {time.perf_counter() - merging:.2f} s; largest worker peak "
        f"{peak:,.0f} MiB resident{own}",
        flush=True,
    )
    return (merged, *totals.summed())


def replay_as_part(
    trees: dict[str, GroupReplay], frame: Frame, *, started: float
) -> SimulationResult:
    """The trees replayed as one what-if part replays its groups
    (``queues.engine.parts.replay_part``): each to a milestone in turn,
    their figures so far taken there, as a part hands them over
    (the trees are spent). Prints a line a milestone. The settlers' and
    schedulers' counts stay inside the part: not returned."""
    marks = milestones(frame)

    def at_milestone(index: int, at: float, _: dict[str, SimulationResult]) -> None:
        print(
            f"  milestone {index + 1}/{len(marks)}: sim day {(at - frame.start) / DAY:5.1f}, "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )

    # Given the share done as a worker's beat is, so that working it out (and
    # the hook inside long slices) is paid for as a part pays for it.
    return merge(replay_part(trees, frame, at_milestone=at_milestone, between=_no_beat))


def _no_beat(share: float) -> None:
    """A part's ``between`` that does nothing with the share it is given."""
