"""The month of load ``bench/replay_scale.py`` replays: a ``--teams``-team
organisation in ``--divisions`` root cohorts, its ClusterQueues rendered as
Berth renders them and sized to the load, and its workloads generated from
``../shared/TRACES.md``'s published statistics (see replay_scale.py for the
figures and assumptions). Pure engine: no Django, no database."""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from queues.demo_org import (  # noqa: E402
    CPU_PER_GPU,
    FLAVORS,
    MEMORY_GIB_PER_GPU,
    PRIORITY_CLASSES,
    QUEUE_CLASS_PRIORITIES,
    SPOT_TAINT,
)
from queues.engine.generate import Runtime  # noqa: E402
from queues.engine.model import PodSet, Policy, Toleration, Workload  # noqa: E402
from queues.engine.scenario import parse  # noqa: E402
from queues.kueue.render import render_cluster_queue, render_cohort, render_flavor  # noqa: E402
from queues.quantity import to_canonical  # noqa: E402
from queues.queue_class_templates import QUEUE_CLASS_TEMPLATES  # noqa: E402

HOUR = 3600.0
DAY = 24 * HOUR
GPU = "nvidia.com/gpu"
ONDEMAND, SPOT = "h100-ondemand", "h100-spot"
TEMPLATES = {t["name"]: t for t in QUEUE_CLASS_TEMPLATES}
PRIORITIES = {p["name"]: int(p["value"]) for p in PRIORITY_CLASSES}
SPOT_TOLERATION = (Toleration(SPOT_TAINT["key"], "Exists"),)


@dataclass(frozen=True)
class ClassLoad:
    name: str
    share: float  # of all workloads
    runtime: Runtime
    gpus: tuple[tuple[int, ...], tuple[float, ...]]
    checkpoint: float | None

    @property
    def priority(self) -> int:
        return PRIORITIES.get(QUEUE_CLASS_PRIORITIES.get(self.name, ""), 0)

    @property
    def cap(self) -> float:
        return float(TEMPLATES[self.name]["max_runtime_seconds"])


LOADS = (
    ClassLoad(
        "interactive-dev", 0.47, Runtime(122, 23.6 * 60), ((1, 2, 4, 8), (80, 12, 6, 2)), None
    ),
    ClassLoad("eval-batch", 0.419, Runtime(481, 1.33 * HOUR), ((1, 2, 4, 8), (70, 15, 10, 5)), 300),
    ClassLoad(
        "training-large", 0.11, Runtime(874, 5 * HOUR), ((8, 16, 32, 64), (40, 30, 20, 10)), 900
    ),
    ClassLoad("urgent-release", 0.001, Runtime(HOUR, 2 * HOUR), ((4, 8), (1, 1)), 600),
)
TEAM_CLASSES = ("interactive-dev", "training-large", "eval-batch")


def intensity(t: float) -> float:
    """Relative arrival rate at ``t`` seconds from a Monday midnight, at most 1.6."""
    hour = (t % DAY) / HOUR
    weekend = int(t // DAY) % 7 >= 5
    return (1 + 0.6 * math.cos(2 * math.pi * (hour - 15) / 24)) * (0.45 if weekend else 1.0)


def team_name(index: int) -> str:
    return f"team-{index:03d}"


def division_of(team: int, teams: int, divisions: int) -> str:
    return f"div-{team * divisions // teams:02d}"


def queue_name(team: int, queue_class: str, teams: int, divisions: int) -> str:
    if queue_class == "urgent-release":
        return f"urgent-release-{division_of(team, teams, divisions)}"
    return f"{team_name(team)}-{queue_class}"


@dataclass
class Trace:
    workloads: list[tuple[Workload, str]]
    offered: dict[str, float]  # ClusterQueue -> GPU-seconds asked for
    biggest: dict[str, int]  # ClusterQueue -> GPUs of its largest job


def generate(args: argparse.Namespace, tick: Callable[[int], None]) -> Trace:
    rng = random.Random(args.seed)
    span = args.days * DAY
    sizes = [(rank + 1) ** -0.7 for rank in range(args.teams)]
    rng.shuffle(sizes)
    team_of = rng.choices(range(args.teams), weights=sizes, k=args.workloads)
    class_of = rng.choices(LOADS, weights=[c.share for c in LOADS], k=args.workloads)
    arrivals = arrival_times(rng, span, args.workloads)
    cpu_milli = to_canonical("cpu", CPU_PER_GPU)
    gib = to_canonical("memory", f"{MEMORY_GIB_PER_GPU}Gi")
    offered: dict[str, float] = {}
    biggest: dict[str, int] = {}
    step = max(1, args.workloads // 10)
    # What every workload of a class, or of a team in a class, shares: worked
    # out once, not per workload (a million of them). The draws are the ones
    # rng.choices and Runtime.sample make, in the same order.
    drawn = {load.name: _Draws(load) for load in LOADS}
    names = {
        (team, load.name): (
            team_name(team),
            queue_name(team, load.name, args.teams, args.divisions),
        )
        for team in range(args.teams)
        for load in LOADS
    }
    # Drawn in arrival order, one random stream; made tree by tree (stable
    # within a tree), each in its place in the list: the same trace, but a
    # tree's workloads lie together in memory, so that replaying tree after
    # tree (tree_by_tree.py) frees whole blocks of it for what comes after.
    gpus_of: list[int] = []
    runtime_of: list[float] = []
    for team, load in zip(team_of, class_of, strict=True):
        draws = drawn[load.name]
        gpus = draws.gpus(rng)
        runtime = draws.runtime(rng)
        gpus_of.append(gpus)
        runtime_of.append(runtime)
        queue = names[team, load.name][1]
        offered[queue] = offered.get(queue, 0.0) + gpus * runtime
        biggest[queue] = max(biggest.get(queue, 0), gpus)
    division = [division_of(team, args.teams, args.divisions) for team in range(args.teams)]
    order = sorted(range(args.workloads), key=lambda i: division[team_of[i]])
    slots: list[tuple[Workload, str] | None] = [None] * args.workloads
    for made, i in enumerate(order, 1):
        load = class_of[i]
        draws = drawn[load.name]
        gpus = gpus_of[i]
        per_pod = min(gpus, 8)
        pod_set = PodSet(
            "main",
            gpus // per_pod,
            {GPU: per_pod, "cpu": cpu_milli * per_pod, "memory": gib * per_pod},
            tolerations=draws.tolerations,
        )
        namespace, queue = names[team_of[i], load.name]
        slots[i] = (
            Workload(
                name=f"job-{i:07d}",
                namespace=namespace,
                cluster_queue=queue,
                pod_sets=(pod_set,),
                priority=draws.priority,
                creation_time=arrivals[i],
                runtime=runtime_of[i],
                checkpoint_interval=load.checkpoint,
            ),
            load.name,
        )
        if made % step == 0:
            tick(made)
    del gpus_of, runtime_of, order
    workloads = [slot for slot in slots if slot is not None]
    return Trace(workloads, offered, biggest)


def arrival_times(rng: random.Random, span: float, count: int) -> list[float]:
    """``count`` arrival times over ``span`` seconds, sorted, thinned to
    ``intensity``."""
    arrivals: list[float] = []
    rand = rng.random
    while len(arrivals) < count:
        t = rand() * span
        if rand() * 1.6 < intensity(t):
            arrivals.append(t)
    arrivals.sort()
    return arrivals


class _Draws:
    """A class's draws as ``rng.choices`` (its GPUs per job) and
    ``Runtime.sample`` (its run time) make them, with what they work out on
    every call worked out once, and what its workloads share."""

    def __init__(self, load: ClassLoad) -> None:
        self.sizes = load.gpus[0]
        self.cumulative = list(itertools.accumulate(load.gpus[1]))
        self.total = self.cumulative[-1] + 0.0
        self.last = len(self.sizes) - 1
        runtime, mean = load.runtime, load.runtime.mean
        self.mu = math.log(runtime.median)
        self.sigma = 0.0
        self.fixed: float | None = None
        if mean is None or mean <= runtime.median:
            self.fixed = runtime.median  # no draw, as Runtime.sample
        else:
            self.sigma = math.sqrt(2 * math.log(mean / runtime.median))
        self.cap = load.cap
        self.priority = load.priority
        self.tolerations = SPOT_TOLERATION if load.name == "eval-batch" else ()

    def gpus(self, rng: random.Random) -> int:
        """``rng.choices(sizes, weights)[0]``, its sums kept."""
        return self.sizes[bisect.bisect(self.cumulative, rng.random() * self.total, 0, self.last)]

    def runtime(self, rng: random.Random) -> float:
        """``Runtime.sample``, its logarithms kept, cut at the class's cap."""
        if self.fixed is not None:
            return min(self.fixed, self.cap)
        return min(math.exp(rng.normalvariate(self.mu, self.sigma)), self.cap)


def quota(flavor: str, gpus: int, borrow: int) -> dict[str, Any]:
    def entry(name: str, per_gpu: int, unit: str) -> dict[str, Any]:
        return {
            "name": name,
            "nominal_quota": f"{gpus * per_gpu}{unit}",
            "borrowing_limit": f"{borrow * per_gpu}{unit}",
        }

    return {
        "name": flavor,
        "resources": [
            entry("cpu", CPU_PER_GPU, ""),
            entry("memory", MEMORY_GIB_PER_GPU, "Gi"),
            entry(GPU, 1, ""),
        ],
    }


def organisation(args: argparse.Namespace, trace: Trace) -> Policy:
    """The ClusterQueues sized to the trace, rendered as Berth renders them."""
    span = args.days * DAY
    owners: dict[str, tuple[str, int]] = {}  # ClusterQueue -> (queue class, a team using it)
    for team in range(args.teams):
        for queue_class in (*TEAM_CLASSES, "urgent-release"):
            owners.setdefault(
                queue_name(team, queue_class, args.teams, args.divisions), (queue_class, team)
            )
    queues: list[dict[str, Any]] = []
    for name, (queue_class, team) in owners.items():
        need = max(1, math.ceil(trace.offered.get(name, 0.0) / span / args.load))
        largest = trace.biggest.get(name, 1)
        if queue_class == "urgent-release":
            flavors = [quota(ONDEMAND, max(need, largest), 0)]
        elif queue_class == "eval-batch":
            ondemand = max(1, round(need / 3))
            spot = max(1, need - ondemand)
            flavors = [
                quota(ONDEMAND, ondemand, max(ondemand, largest - ondemand)),
                quota(SPOT, spot, max(spot, largest - spot)),
            ]
        else:
            flavors = [quota(ONDEMAND, need, max(need, largest - need))]
        template = TEMPLATES[queue_class]
        queues.append(
            {
                **{k: template[k] for k in template if k != "name"},
                "name": name,
                "team": None if queue_class == "urgent-release" else team_name(team),
                "cohort": division_of(team, args.teams, args.divisions),
                "queue_class": queue_class,
                "when_can_borrow": "MayStopSearch",
                "when_can_preempt": "TryNextFlavor",
                "resource_groups": [
                    {"covered_resources": ["cpu", "memory", GPU], "flavors": flavors}
                ],
            }
        )
    document = {
        "resourceFlavors": [
            render_flavor({k: v for k, v in f.items() if k != "topology_name"}) for f in FLAVORS
        ],
        "cohorts": [
            render_cohort({"name": name}) for name in sorted({q["cohort"] for q in queues})
        ],
        "workloadPriorityClasses": [
            {"name": p["name"], "value": p["value"]} for p in PRIORITY_CLASSES
        ],
        "clusterQueues": [
            render_cluster_queue(
                q, requires_approval=TEMPLATES[q["queue_class"]]["requires_approval"]
            )
            for q in queues
        ],
    }
    return parse(document, "replay_scale").policy
