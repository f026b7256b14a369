"""Capacity planning, the search: the smallest capacity of a flavor at which
each target holds (the p-th percentile wait of a group of ClusterQueues, say
the queue class ``training-large``, at most so long), with the curve of
waits against GPUs that the search walked and how far the seeds spread.

Capacities are whole nodes away from today's (``current + k × node``): the
search replays today's capacity first, then gallops (1, 2, 4, 8 … nodes) up
from it while a target fails, or down while every target holds, and bisects
between the last capacity that failed and the first that held. It assumes a
wait that only shrinks as capacity grows; every capacity replayed is kept,
so the curve shows where noise breaks that. A target holds at a capacity
when it holds in every seed (the worst seed decides: an answer to buy by),
and a wait that is only a lower bound (workloads still waiting when the
replay stopped, at or under the percentile) never holds. Each flavor is
searched on its own, the others kept as they are.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import collections
import copy
import math
import pickle
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queues.engine.capacity import (
    GPU,
    Perturbation,
    flavor_capacity,
    node_gpus,
    perturbed,
    serving,
    with_capacity,
)
from queues.engine.model import Policy, Workload
from queues.engine.scheduler import CycleResult
from queues.engine.simulator import Simulator, WorkloadRecord

# Search no further than this many times today's capacity (at least 8 nodes more).
DEFAULT_MAX_FACTOR = 4.0
# A replay's watched simulator beats (see ``Search.replay``) every so many
# events and scheduling cycles (a burst of arrivals is one event time, many cycles).
BEAT_EVERY_EVENTS = 2_000

# A replay the search asks for: (flavor, its GPUs, seed).
Point = tuple[str, int, int]
# What one replay shows, per group: {"wait", "at_least", "workloads", "never_admitted"}
# (and "stopped_at" when every target failed before its end).
Figures = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Target:
    """The ``percentile``-th wait of the workloads of ``group`` at most
    ``max_wait`` seconds."""

    group: str
    percentile: float
    max_wait: float


class FrozenStream:
    """A stream kept pickled, as a ``Load.build``: every call gives a fresh
    copy, and it pickles itself (a plan's replays shared out among workers
    carry their load with them), unlike a closure over the database."""

    def __init__(self, workloads: list[tuple[Workload, str]]) -> None:
        self.frozen = pickle.dumps(workloads, protocol=pickle.HIGHEST_PROTOCOL)

    def __call__(self) -> list[tuple[Workload, str]]:
        loaded: list[tuple[Workload, str]] = pickle.loads(self.frozen)
        return loaded


@dataclass
class Load:
    """What is replayed: ``build()`` gives fresh workloads (the same every
    call), with the simulator's settings for them (see ``Simulator``)."""

    build: Callable[[], list[tuple[Workload, str]]]
    horizon: float | None = None
    context: frozenset[str] = frozenset()
    eviction_delay: float = 30.0
    requeue_delay: float = 1.0
    check_delays: Mapping[str, float] = field(default_factory=dict)


@dataclass
class Request:
    """A plan: ``groups`` names sets of ClusterQueues (queue classes, or one
    ClusterQueue each) whose waits the curve shows; ``targets`` are what must
    hold; ``flavors`` the flavors to size, each searched on its own."""

    policy: Policy
    load: Load
    groups: dict[str, tuple[str, ...]]
    targets: list[Target]
    flavors: list[str]
    seeds: int = 3
    perturbation: Perturbation = field(default_factory=Perturbation)
    resource: str = GPU
    max_factor: float = DEFAULT_MAX_FACTOR


class _Failed(Exception):
    """Every target of a replay has failed by ``at``: the rest cannot save it."""

    def __init__(self, at: float) -> None:
        super().__init__(f"every target failed by {at:g} s")
        self.at = at


@dataclass
class _Watch:
    """One target during a replay: its workloads' deadlines (arrival + the
    limit), in order, and how many late ones fail it."""

    deadlines: collections.deque[tuple[float, str]]
    fails_at: int
    late: int = 0


class _Watcher:
    """Stops a replay as soon as every target has failed: a capacity far too
    small replays a month of ever longer queues, the slowest replays of a
    search, to learn only that it is too small. A workload is late once the
    clock passes its deadline with it not admitted by then; more late than
    the percentile allows and the target fails whatever happens next. It
    watches the simulator's events (``Simulator.before_event``), and beats
    through a burst's cycles too (``Simulator.after_cycle``)."""

    def __init__(
        self,
        records: dict[str, WorkloadRecord],
        watches: list[_Watch],
        beat: Callable[[], None] | None = None,
    ) -> None:
        self.records = records
        self.watches = watches
        self.beat = beat
        self.steps = 0

    def before_event(self, now: float, kind: str, payload: Any) -> None:
        if self.watches:
            self._check(now)
        self._count()

    def after_cycle(self, _: CycleResult) -> None:
        self._count()

    def _count(self) -> None:
        if self.beat is not None:
            self.steps += 1
            if self.steps % BEAT_EVERY_EVENTS == 0:
                self.beat()

    def _check(self, now: float) -> None:
        failed = True
        for watch in self.watches:
            deadlines = watch.deadlines
            while deadlines and deadlines[0][0] < now:
                deadline, key = deadlines.popleft()
                record = self.records.get(key)  # None: not even arrived yet
                admitted = None if record is None else record.first_admitted
                if admitted is None or admitted > deadline:
                    watch.late += 1
            failed = failed and watch.late >= watch.fails_at
        if failed:
            raise _Failed(now)


def percentile_wait(waits: list[tuple[float, bool]], p: float) -> tuple[float | None, bool]:
    """Nearest-rank ``p``-th percentile of (wait, censored) pairs, and whether
    it is only a lower bound (a censored wait at or under its rank)."""
    if not waits:
        return None, False
    ordered = sorted(waits)  # exact waits sort before censored ones of the same length
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1][0], any(censored for _, censored in ordered[:rank])


class Search:
    """One plan's replays, kept by (flavor, capacity), and the answers.

    ``replayer`` answers the replays the search asks for (``Point`` ->
    ``Figures``); by default they are replayed here, one after another
    (``replay``). Any other must give what ``replay`` gives: the search, its
    answers and its curve depend only on the figures."""

    def __init__(
        self,
        request: Request,
        progress: Callable[[int, int], None] | None = None,
        replayer: Callable[[Point], Figures] | None = None,
    ) -> None:
        self.request = request
        self.progress = progress
        self.replayer = replayer
        self.replays = 0
        self.budget = self._estimate()
        # (flavor, gpus) -> per seed: group -> {"wait", "at_least", "workloads", "never"}
        self.points: dict[tuple[str, int], list[Figures]] = {}
        self.percentiles = self._group_percentiles()

    def _group_percentiles(self) -> dict[str, float]:
        """The percentile each group is shown at: its target's (the first), else 90."""
        chosen: dict[str, float] = {}
        for target in self.request.targets:
            if chosen.setdefault(target.group, target.percentile) != target.percentile:
                raise ValueError(
                    f"group {target.group!r} has targets at two percentiles; give one per group"
                )
        return {group: chosen.get(group, 90.0) for group in self.request.groups}

    def _estimate(self) -> int:
        """Replays a search will likely take (for progress): today's, a gallop
        and a bisection over the range, per flavor and seed."""
        total = 0
        for flavor in self.request.flavors:
            if not any(self.serves(t, flavor) for t in self.request.targets):
                continue
            low, high = self.bounds(flavor)
            steps = max(1, math.ceil(math.log2(high - low + 2)))
            total += (2 * steps + 1) * self.request.seeds
        return max(1, total)

    def serves(self, target: Target, flavor: str) -> bool:
        """Whether some ClusterQueue of the target's group may use ``flavor``."""
        queues = self.request.groups.get(target.group, ())
        return bool(serving(self.request.policy, flavor, self.request.resource) & set(queues))

    # ------------------------------------------------------------- the range

    def node(self, flavor: str) -> int:
        return node_gpus(self.request.policy, flavor, self.request.resource)

    def current(self, flavor: str) -> int:
        return flavor_capacity(self.request.policy, flavor, self.request.resource)

    def bounds(self, flavor: str) -> tuple[int, int]:
        """The steps (whole nodes from today's capacity) the search may try:
        down to one node's worth left, up to ``max_factor`` × today's."""
        node, current = self.node(flavor), self.current(flavor)
        low = -((current - 1) // node) if current > 0 else 0
        ceiling = max(current * self.request.max_factor, current + 8 * node)
        high = max(1, math.floor((ceiling - current) / node))
        return low, high

    def gpus(self, flavor: str, step: int) -> int:
        return self.current(flavor) + step * self.node(flavor)

    # ----------------------------------------------------------- the replays

    def seed(self, flavor: str, gpus: int, seed: int) -> Figures:
        """Seed ``seed``'s waits per group with ``flavor`` at ``gpus`` (cached;
        the seeds of a capacity are replayed in order, as they are asked for)."""
        seeds = self.points.setdefault((flavor, gpus), [])
        while len(seeds) <= seed:
            point = (flavor, gpus, len(seeds))
            seeds.append(self.replayer(point) if self.replayer else self.replay(*point))
            self.replays += 1
            if self.progress is not None:
                self.progress(min(self.replays, self.budget - 1), self.budget)
        return seeds[seed]

    def evaluate(self, flavor: str, gpus: int) -> list[Figures]:
        """Every seed's waits per group with ``flavor`` at ``gpus``."""
        for seed in range(self.request.seeds):
            self.seed(flavor, gpus, seed)
        return self.points[(flavor, gpus)]

    def replay(
        self, flavor: str, gpus: int, seed: int, beat: Callable[[], None] | None = None
    ) -> Figures:
        """Seed ``seed``'s waits per group with ``flavor`` at ``gpus``, replayed
        here (not kept); ``beat`` is called every ``BEAT_EVERY_EVENTS`` events
        and cycles (a shared-out replay's heartbeat: it may raise to stop the replay)."""
        policy = with_capacity(self.request.policy, flavor, gpus, self.request.resource)
        load = self.request.load
        stream = perturbed(
            load.build(),
            seed,
            self.request.perturbation,
            context=load.context,
            horizon=load.horizon,
        )
        simulator = Simulator(
            policy,
            stream,
            start=0.0 if load.horizon is not None else None,
            horizon=load.horizon,
            context=load.context,
            eviction_delay=load.eviction_delay,
            requeue_delay=load.requeue_delay,
            check_delays=load.check_delays,
        )
        watcher = _Watcher(simulator.records, self._watches(stream, load.context), beat)
        del stream  # the simulator lets each workload go once it has finished
        simulator.before_event = watcher.before_event
        simulator.after_cycle = watcher.after_cycle
        try:
            result = simulator.run()
            records, end, stopped = result.records, result.end, None
        except _Failed as failed:
            records, end, stopped = simulator.all_records(), failed.at, failed.at
        figures = self._waits(records, end)
        if stopped is not None:  # every target failed: what it shows are lower bounds
            for group in figures.values():
                group["at_least"] = True
                group["stopped_at"] = stopped
        return figures

    def _watches(self, stream: list[tuple[Workload, str]], context: frozenset[str]) -> list[_Watch]:
        """What tells a replay every target has failed: per target, its
        group's measured workloads in arrival order, and how many may wait
        longer than its limit before its percentile does."""
        members: dict[str, set[str]] = {g: set(q) for g, q in self.request.groups.items()}
        watches = []
        for target in self.request.targets:
            queues = members.get(target.group, set())
            arrivals = sorted(
                (max(w.creation_time, 0.0) + target.max_wait, w.key)
                for w, _ in stream
                if w.cluster_queue in queues and w.key not in context
            )
            rank = max(1, math.ceil(target.percentile / 100 * len(arrivals)))
            # More than len - rank late and fewer than rank can be on time.
            watches.append(_Watch(collections.deque(arrivals), len(arrivals) - rank + 1))
        return watches

    def _waits(self, records: Mapping[str, WorkloadRecord], end: float) -> Figures:
        members: dict[str, list[str]] = {}  # a ClusterQueue may be in several groups
        for group, queues in self.request.groups.items():
            for queue in queues:
                members.setdefault(queue, []).append(group)
        waits: dict[str, list[tuple[float, bool]]] = {g: [] for g in self.request.groups}
        for record in records.values():
            if record.measured:
                for group in members.get(record.cluster_queue, ()):
                    waits[group].append(record.censored_wait(end))
        figures = {}
        for group, found in waits.items():
            wait, at_least = percentile_wait(found, self.percentiles[group])
            figures[group] = {
                "wait": wait,
                "at_least": at_least,
                "workloads": len(found),
                "never_admitted": sum(1 for _, censored in found if censored),
            }
        return figures

    def holds(self, target: Target, flavor: str, gpus: int, seeds: int | None = None) -> bool:
        """The target holds in every seed (the first ``seeds`` of them), by
        waits that are not lower bounds; the seeds after the first that
        fails are not replayed."""
        for index in range(self.request.seeds if seeds is None else seeds):
            figures = self.seed(flavor, gpus, index)[target.group]
            wait, at_least = figures["wait"], figures["at_least"]
            if wait is None or at_least or wait > target.max_wait:
                return False
        return True

    # ------------------------------------------------------------ the search

    @staticmethod
    def _first(met: Callable[[int], bool], start: int, low: int, high: int) -> int | None:
        """The smallest step in [low, high] where ``met`` holds, starting at
        ``start``: gallop down while it holds, or up while it fails, then
        bisect; None when it fails even at ``high``."""
        held: int | None
        if met(start):
            held, failed, step = start, low - 1, 1
            while held > low:  # gallop down while it holds
                tried = max(start - step, low)
                if not met(tried):
                    failed = tried
                    break
                held, step = tried, step * 2
        else:
            held, failed, step = None, start, 1
            while held is None:  # gallop up while it fails
                tried = min(start + step, high)
                if met(tried):
                    held = tried
                elif tried == high:
                    return None
                else:
                    failed, step = tried, step * 2
        while held - failed > 1:  # bisect: failed < answer <= held
            middle = (held + failed) // 2
            if met(middle):
                held = middle
            else:
                failed = middle
        return held

    def smallest(self, target: Target, flavor: str) -> dict[str, Any]:
        """The fewest GPUs of ``flavor`` (whole nodes from today's) at which
        ``target`` holds, or None with the most tried when none does.

        The first seed's answer is searched first, then every seed is asked
        from there up: no capacity under the first seed's answer can hold in
        every seed, so only the capacities from it on need them all (a
        capacity that holds costs a whole replay per seed)."""
        low, high = self.bounds(flavor)
        first = self._first(
            lambda step: self.holds(target, flavor, self.gpus(flavor, step), seeds=1),
            0,
            low,
            high,
        )
        found = first
        if first is not None and self.request.seeds > 1:
            found = self._first(
                lambda step: self.holds(target, flavor, self.gpus(flavor, step)),
                first,
                first,
                high,
            )
        if found is None:
            return {"gpus": None, "tried_up_to": self.gpus(flavor, high)}
        return {"gpus": self.gpus(flavor, found), "tried_up_to": None}

    def run(self) -> dict[str, Any]:
        """Every flavor's answers and curve, JSON-ready."""
        flavors = []
        for flavor in self.request.flavors:
            current = self.current(flavor)
            answers = []
            for target in self.request.targets:
                answer: dict[str, Any] = {
                    "group": target.group,
                    "percentile": target.percentile,
                    "max_wait": target.max_wait,
                    "served": self.serves(target, flavor),
                }
                if not answer["served"]:  # no replay can tell: more of it changes nothing
                    answers.append(
                        {**answer, "gpus": None, "change": None, "nodes": None}
                        | {"holds_today": None, "tried_up_to": None}
                    )
                    continue
                found = self.smallest(target, flavor)
                gpus = found["gpus"]
                answers.append(
                    {
                        **answer,
                        "gpus": gpus,
                        "change": None if gpus is None else gpus - current,
                        "nodes": None if gpus is None else math.ceil(gpus / self.node(flavor)),
                        "holds_today": self.holds(target, flavor, current),
                        "tried_up_to": found["tried_up_to"],
                    }
                )
            needed = [a["gpus"] for a in answers if a["served"]]
            flavors.append(
                {
                    "flavor": flavor,
                    "current": current,
                    "node_gpus": self.node(flavor),
                    "answers": answers,
                    # Every target it serves at once: the most any one needs (None if one
                    # never holds, or it serves none).
                    "gpus": None if None in needed or not needed else max(needed),
                    "curve": self.curve(flavor),
                }
            )
        if self.progress is not None:
            self.progress(self.budget, self.budget)
        return {
            "flavors": flavors,
            "percentiles": self.percentiles,
            "replays": self.replays,
            "seeds": self.request.seeds,
        }

    def curve(self, flavor: str) -> list[dict[str, Any]]:
        """Per capacity replayed (ascending), per group: the median wait over
        the seeds, the lowest and highest, and whether any is a lower bound."""
        rows = []
        for (name, gpus), seeds in sorted(self.points.items()):
            if name != flavor:
                continue
            groups = {}
            for group in self.request.groups:
                waits = [s[group]["wait"] for s in seeds if s[group]["wait"] is not None]
                groups[group] = {
                    "median": statistics.median(waits) if waits else None,
                    "low": min(waits, default=None),
                    "high": max(waits, default=None),
                    "at_least": any(s[group]["at_least"] for s in seeds),
                    "workloads": max((s[group]["workloads"] for s in seeds), default=0),
                    "never_admitted": max((s[group]["never_admitted"] for s in seeds), default=0),
                }
            rows.append({"gpus": gpus, "groups": groups})
        return rows


def plan(request: Request, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Search every flavor of the request; see ``Search``."""
    return Search(copy.copy(request), progress).run()
