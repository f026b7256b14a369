"""Capacity planning's search, on streams whose answer is known: jobs of g GPUs
arriving every T seconds and running R seconds need ceil(R/T) × g GPUs at once;
with fewer the queue grows without end, with that many nobody waits. The
search must find it within one node, searching up from too little and down
from too much. Also: how a capacity maps onto quotas and nodes, and what the
seeds do to the stream. No database."""

from __future__ import annotations

import math
from typing import Any

import pytest

from queues.engine.capacity import (
    CapacityError,
    Perturbation,
    flavor_capacity,
    flavor_nodes,
    node_gpus,
    perturbed,
    share_out,
    with_capacity,
)
from queues.engine.capacity_search import Load, Request, Search, Target, percentile_wait, plan
from queues.engine.experiment import workload_stream
from queues.engine.scenario import parse

GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"


def steady(
    nominal: int,
    *,
    interval: float = 600,
    runtime: float = 2700,
    gpus: int = 4,
    count: int = 60,
    node_size: int | None = None,
    nodes: int = 0,
) -> dict[str, Any]:
    """One ClusterQueue ``train`` holding ``nominal`` GPUs of flavor h100 (and
    24 cores a GPU); ``node_size``: h100 is topology-aware, on ``nodes`` nodes."""
    flavor: dict[str, Any] = {"name": "h100", "nodeLabels": {"gpu": "h100"}}
    extra: dict[str, Any] = {}
    if node_size is not None:
        flavor["topologyName"] = "hosts"
        extra = {
            "topologies": [{"name": "hosts", "levels": [{"nodeLabel": HOSTNAME}]}],
            "nodes": [
                {
                    "name": "n",
                    "count": nodes,
                    "labels": {"gpu": "h100"},
                    "capacity": {"cpu": 24 * node_size, GPU: node_size},
                }
            ],
        }
    return {
        "resourceFlavors": [flavor],
        "clusterQueues": [
            {
                "name": "train",
                "queueingStrategy": "StrictFIFO",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", GPU],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 24 * nominal},
                                    {"name": GPU, "nominalQuota": nominal},
                                ],
                            }
                        ],
                    }
                ],
            }
        ],
        "generate": {
            "seed": 1,
            "classes": [
                {
                    "name": "steady",
                    "clusterQueues": ["train"],
                    "countPerQueue": count,
                    "interval": interval,
                    "runtime": runtime,
                    "podSets": [{"count": 1, "requests": {"cpu": 24 * gpus, GPU: gpus}}],
                }
            ],
        },
        "simulation": {"requeueDelay": 0, "evictionDelay": 0},
        **extra,
    }


def request(document: dict[str, Any], **kwargs: Any) -> Request:
    scenario = parse(document)
    defaults: dict[str, Any] = {
        "groups": {"training-large": ("train",)},
        "targets": [Target("training-large", 90, 60.0)],
        "flavors": ["h100"],
        "seeds": 1,
        "perturbation": Perturbation(jitter=0, runtime_spread=0),
    }
    return Request(
        policy=scenario.policy,
        load=Load(
            build=lambda: workload_stream(scenario),
            eviction_delay=scenario.timing.eviction_delay,
            requeue_delay=scenario.timing.requeue_delay,
        ),
        **{**defaults, **kwargs},
    )


def needed(interval: float, runtime: float, gpus: int) -> int:
    return math.ceil(runtime / interval) * gpus


def answer(result: dict[str, Any]) -> dict[str, Any]:
    (flavor,) = result["flavors"]
    (found,) = flavor["answers"]
    return {**found, "node": flavor["node_gpus"], "current": flavor["current"]}


@pytest.mark.parametrize(
    ("nominal", "interval", "runtime", "gpus"),
    [
        (8, 600, 2700, 4),  # too little today: searched up (20 needed, 24 in whole nodes)
        (64, 600, 2700, 4),  # too much today: searched down
        (8, 300, 1000, 8),  # 32 needed, a multiple of the node
        (16, 900, 5000, 2),  # 12 needed
    ],
)
def test_steady_arrivals_need_ceil_r_over_t_times_g_gpus_within_one_node(
    nominal: int, interval: float, runtime: float, gpus: int
) -> None:
    result = plan(request(steady(nominal, interval=interval, runtime=runtime, gpus=gpus)))
    found = answer(result)
    exact = needed(interval, runtime, gpus)
    assert found["node"] == 8
    assert exact <= found["gpus"] < exact + found["node"], found
    # It is the smallest whole-node step from today's capacity that holds.
    assert (found["gpus"] - nominal) % 8 == 0
    assert found["change"] == found["gpus"] - nominal
    assert found["holds_today"] == (nominal >= exact)


def test_on_topology_aware_nodes_of_four_gpus_the_answer_is_exact() -> None:
    """Nodes of 4 GPUs: 20 GPUs is five whole nodes, so the search lands on it,
    and the nodes the answer runs on are five."""
    document = steady(8, node_size=4, nodes=2)
    result = plan(request(document))
    found = answer(result)
    assert found["node"] == 4
    assert found["gpus"] == needed(600, 2700, 4) == 20
    assert found["nodes"] == 5
    policy = with_capacity(parse(document).policy, "h100", 20)
    assert len(flavor_nodes(policy, "h100")) == 5


def test_the_curve_has_every_capacity_tried_and_waits_fall_as_gpus_grow() -> None:
    result = plan(request(steady(8)))
    curve = result["flavors"][0]["curve"]
    gpus = [point["gpus"] for point in curve]
    assert gpus == sorted(gpus) and 8 in gpus and 24 in gpus
    waits = [point["groups"]["training-large"]["median"] for point in curve]
    assert waits == sorted(waits, reverse=True)
    at_answer = next(p for p in curve if p["gpus"] == 24)["groups"]["training-large"]
    assert at_answer["median"] == 0 and at_answer["workloads"] == 60


def test_a_target_out_of_reach_says_how_far_it_searched() -> None:
    """A 16-GPU job in a queue whose flavor may grow to 4 × 4 GPUs: never."""
    result = plan(request(steady(4, gpus=16, count=5), max_factor=2.0))
    found = answer(result)
    assert found["gpus"] is None and found["change"] is None
    assert found["tried_up_to"] == 4 + 8 * 8  # at least eight nodes more
    assert result["flavors"][0]["gpus"] is None


def test_seeds_spread_the_waits_and_the_worst_seed_decides() -> None:
    perturbation = Perturbation(jitter=300, runtime_spread=0.3)
    search = Search(request(steady(16), seeds=4, perturbation=perturbation))
    result = search.run()
    assert result["replays"] == sum(len(seeds) for seeds in search.points.values())
    found = result["flavors"][0]["answers"][0]["gpus"]
    assert len(search.points[("h100", found)]) == 4  # a capacity that holds: every seed
    # With a limit nothing reaches, every seed of 16 GPUs runs to the end.
    lenient = [Target("training-large", 90, 10**7)]
    search = Search(request(steady(16), seeds=4, perturbation=perturbation, targets=lenient))
    seeds = search.evaluate("h100", 16)
    waits = sorted(seed["training-large"]["wait"] for seed in seeds)
    assert not any(seed["training-large"]["at_least"] for seed in seeds)
    assert waits[0] < waits[-1]  # the seeds differ
    assert search.holds(Target("training-large", 90, waits[-1]), "h100", 16)
    assert not search.holds(Target("training-large", 90, waits[-1] - 1e-6), "h100", 16)


def test_a_capacity_that_fails_stops_its_replay_and_its_other_seeds() -> None:
    """16 GPUs for 20 GPUs of steady work: once more than a tenth of the jobs
    are late, p90 has failed; the replay stops there, its waits are lower
    bounds, and no other seed is replayed."""
    search = Search(request(steady(16, count=200), seeds=3))
    target = Target("training-large", 90, 60.0)
    assert not search.holds(target, "h100", 16)
    (only,) = search.points[("h100", 16)]
    figures = only["training-large"]
    assert figures["at_least"] and 0 < figures["stopped_at"] < 200 * 600
    full = Search(request(steady(16, count=200), seeds=1, targets=[]))
    complete = full.seed("h100", 16, 0)["training-large"]
    assert "stopped_at" not in complete and complete["wait"] > figures["wait"] > 60


def test_growth_adds_seeded_copies() -> None:
    scenario = parse(steady(8, count=1000))
    plain = workload_stream(scenario)
    grown = perturbed(workload_stream(scenario), 3, Perturbation(growth=1.3))
    copies = [w for w, _ in grown if "+" in w.name]
    assert len(grown) == len(plain) + len(copies)
    assert 250 <= len(copies) <= 350
    assert len({w.key for w, _ in grown}) == len(grown)
    again = perturbed(workload_stream(scenario), 3, Perturbation(growth=1.3))
    assert [(w.key, w.creation_time, w.runtime) for w, _ in again] == [
        (w.key, w.creation_time, w.runtime) for w, _ in grown
    ]
    other = perturbed(workload_stream(scenario), 4, Perturbation(growth=1.3))
    assert [w.creation_time for w, _ in other] != [w.creation_time for w, _ in grown]
    doubled = perturbed(workload_stream(scenario), 3, Perturbation(growth=2.0, jitter=0))
    assert len(doubled) == 2 * len(plain)


def test_context_workloads_are_kept_as_recorded() -> None:
    scenario = parse(steady(8, count=3))
    stream = workload_stream(scenario)
    kept = stream[0][0].key
    out = perturbed(stream, 1, Perturbation(growth=2.0), context=frozenset({kept}))
    assert sum(1 for w, _ in out if w.key.startswith(kept)) == 1
    assert out[0][0].creation_time == 0 and out[0][0].runtime == 2700


def test_capacity_is_shared_out_pro_rata_with_the_cpu_that_comes_with_it() -> None:
    assert share_out({"a": 24, "b": 8, "c": 16}, 60) == {"a": 30, "b": 10, "c": 20}
    parts = share_out({"a": 1, "b": 1, "c": 1}, 10)
    assert sum(parts.values()) == 10 and sorted(parts.values()) == [3, 3, 4]
    document = steady(8)
    queue = document["clusterQueues"][0]
    queue["cohortName"] = "org"
    second = {**queue, "name": "other"}
    second["resourceGroups"] = [
        {
            "coveredResources": ["cpu", GPU],
            "flavors": [
                {
                    "name": "h100",
                    "resources": [
                        {"name": "cpu", "nominalQuota": 24 * 24},
                        {"name": GPU, "nominalQuota": 24, "lendingLimit": 20},
                    ],
                }
            ],
        }
    ]
    document["clusterQueues"].append(second)
    policy = parse(document).policy
    assert flavor_capacity(policy, "h100") == 32
    assert node_gpus(policy, "h100") == 8
    bigger = with_capacity(policy, "h100", 48)
    assert flavor_capacity(bigger, "h100") == 48
    quotas = {
        name: q.resource_groups[0].flavors[0].resources for name, q in bigger.cluster_queues.items()
    }
    assert quotas["train"][GPU].nominal == 12
    assert quotas["train"]["cpu"].nominal == 24 * 12 * 1000  # milli-CPU, 24 cores a GPU
    assert quotas["other"][GPU].nominal == 36 and quotas["other"][GPU].lending_limit == 20
    smaller = with_capacity(policy, "h100", 16).cluster_queues["other"]
    assert smaller.resource_groups[0].flavors[0].resources[GPU].lending_limit == 12


def test_a_flavor_without_quota_or_a_negative_capacity_is_refused() -> None:
    document = steady(8)
    document["resourceFlavors"].append({"name": "a100"})
    policy = parse(document).policy
    with pytest.raises(CapacityError, match="a100"):
        with_capacity(policy, "a100", 8)
    with pytest.raises(CapacityError, match="less than none"):
        with_capacity(policy, "h100", -8)


def test_a_wait_with_censored_waits_under_its_rank_is_a_lower_bound() -> None:
    assert percentile_wait([], 90) == (None, False)
    waits = [(float(i), False) for i in range(9)] + [(100.0, True)]
    assert percentile_wait(waits, 90) == (8.0, False)
    assert percentile_wait(waits, 100) == (100.0, True)
    assert percentile_wait([(5.0, True), (9.0, False)], 50) == (5.0, True)


def test_one_late_workload_in_ten_leaves_p90_holding() -> None:
    """Ten 1-GPU jobs at once on 9 GPUs: one waits 1000 s, nine not at all. p90
    (the 9th wait) is 0 s, so the target holds; the replay must not stop at
    the first late job. p95 (the 10th) fails."""
    document = steady(9, interval=0.001, runtime=1000, gpus=1, count=10)
    holds = Search(request(document)).holds(Target("training-large", 90, 60.0), "h100", 9)
    assert holds
    strict = [Target("training-large", 95, 60.0)]
    assert not Search(request(document, targets=strict)).holds(strict[0], "h100", 9)


def test_a_flavor_the_targets_queues_do_not_list_is_not_searched() -> None:
    """Spot quota held by another queue: no amount of it helps ``train``, so
    the plan says so without a replay for it."""
    document = steady(8)
    document["resourceFlavors"].append({"name": "spot"})
    document["clusterQueues"].append(
        {
            "name": "batch",
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "spot", "resources": [{"name": GPU, "nominalQuota": 16}]}],
                }
            ],
        }
    )
    search = Search(request(document, flavors=["spot", "h100"]))
    result = search.run()
    spot, h100 = result["flavors"]
    (answer,) = spot["answers"]
    assert answer["served"] is False and answer["gpus"] is None and spot["gpus"] is None
    assert spot["curve"] == [] and all(flavor == "h100" for flavor, _ in search.points)
    assert h100["answers"][0]["served"] and h100["gpus"] == 24


class Scripted:
    """Made-up replays for the search (its replayer): seed ``s`` holds from
    ``needs[s]`` GPUs."""

    def __init__(self, needs: list[int]) -> None:
        self.needs = needs
        self.asked: list[tuple[int, int]] = []

    def __call__(self, point: tuple[str, int, int]) -> dict[str, dict[str, Any]]:
        _, gpus, seed = point
        self.asked.append((gpus, seed))
        wait = 0.0 if gpus >= self.needs[seed] else 3600.0
        return {"training-large": {"wait": wait, "at_least": False, "workloads": 1}}


@pytest.mark.parametrize(
    ("needs", "nominal"),
    [([16, 40, 24], 16), ([40, 16, 24], 16), ([8, 8, 56], 64), ([24, 24, 24], 64), ([8], 8)],
)
def test_the_worst_seed_decides_and_only_capacities_from_the_first_seeds_answer_replay_all(
    needs: list[int], nominal: int
) -> None:
    scripted = Scripted(needs)
    search = Search(request(steady(nominal), seeds=len(needs)), replayer=scripted)
    assert search.smallest(Target("training-large", 90, 60.0), "h100")["gpus"] == max(needs)
    first = needs[0]
    assert all(gpus >= first for gpus, seed in scripted.asked if seed > 0)


@pytest.mark.parametrize("nominal", [8, 16, 64])
def test_the_search_finds_what_trying_every_capacity_finds(nominal: int) -> None:
    """With jittered arrivals and resampled runtimes the seeds need different
    capacities; the search (the first seed's answer, then every seed from
    there up) lands where a scan of every whole-node capacity does."""
    perturbation = Perturbation(jitter=400, runtime_spread=0.4)
    make = lambda: Search(  # noqa: E731
        request(steady(nominal, count=80), seeds=4, perturbation=perturbation)
    )
    found = make().run()["flavors"][0]["answers"][0]["gpus"]
    scan = make()
    low, high = scan.bounds("h100")
    target = Target("training-large", 90, 60.0)
    every = [scan.gpus("h100", k) for k in range(low, high + 1)]
    first = next(g for g in every if scan.holds(target, "h100", g))
    assert found == first
    # The seeds disagree somewhere, or this would not test the worst seed.
    alone = next(g for g in every if scan.holds(target, "h100", g, seeds=1))
    assert alone <= first
