"""A replay split into independent groups and merged (``queues.engine.split``)
gives the whole replay's result, to the last record, usage integral, sample
and cycle: on random policies and streams (hypothesis), and on two cohort
trees that end at different times with work still running in one (no
database)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.groups import EVERYTHING, independent_groups
from queues.engine.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    PodSet,
    Policy,
    Quota,
    ResourceFlavor,
    ResourceGroup,
    WaitForPodsReady,
    Workload,
)
from queues.engine.replay_records import SimulationResult
from queues.engine.result_codec import from_json, to_json
from queues.engine.simulator import Simulator
from queues.engine.split import group_simulators, merge, replay_split
from tests.engine.test_properties import draw_workloads, policies


def everything(result: SimulationResult) -> Any:
    return (
        result.start,
        result.end,
        result.records,
        result.totals,
        result.nominal,
        result.preemptions_by_reason,
        result.preemptions_by_queue,
        result.series,
        result.cycles,
        result.admissions,
        result.livelocks,
        result.admission_log,
    )


def both(policy: Policy, workloads: list[Workload], **options: Any) -> tuple[Any, Any]:
    whole = Simulator(policy, [(w, "c") for w in copy.deepcopy(workloads)], **options).run()
    split = replay_split(policy, [(w, "c") for w in copy.deepcopy(workloads)], **options)
    return everything(whole), everything(split)


@st.composite
def streams(draw: Any) -> tuple[Policy, list[Workload], dict[str, Any]]:
    policy = draw(policies())
    workloads = draw_workloads(draw, policy, draw(st.integers(1, 14)), latest=60, timed=True)
    options = {
        "eviction_delay": float(draw(st.sampled_from([0, 3]))),
        "requeue_delay": float(draw(st.sampled_from([0, 1]))),
        # Some policies make workloads preempt each other for ever: the clock stops.
        "horizon": 3_600.0,
        "samples": draw(st.sampled_from([7, 240])),
    }
    return policy, workloads, options


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_a_split_replay_merged_is_the_whole_replay(
    case: tuple[Policy, list[Workload], dict[str, Any]],
) -> None:
    policy, workloads, options = case
    whole, split = both(policy, workloads, **options)
    assert split == whole


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_groups_replayed_apart_and_sent_as_json_merge_to_the_whole_replay(
    case: tuple[Policy, list[Workload], dict[str, Any]],
) -> None:
    # What a worker replaying one group sends back: strict JSON (PostgreSQL's).
    policy, workloads, options = case
    whole = Simulator(policy, [(w, "c") for w in copy.deepcopy(workloads)], **options).run()
    groups = group_simulators(policy, [(w, "c") for w in copy.deepcopy(workloads)], **options)
    sent = {
        group: from_json(json.loads(json.dumps(to_json(simulator.run()), allow_nan=False)))
        for group, simulator in groups.items()
    }
    assert everything(merge(sent)) == everything(whole)


GPU = "nvidia.com/gpu"


def queue(name: str, cohort: str, nominal: int, borrow: int | None = None) -> ClusterQueue:
    return ClusterQueue(
        name,
        cohort=cohort,
        resource_groups=(
            ResourceGroup((GPU,), (FlavorQuotas("h100", {GPU: Quota(nominal, borrow)}),)),
        ),
    )


def two_trees() -> Policy:
    return Policy(
        {"h100": ResourceFlavor("h100")},
        {"research": Cohort("research"), "product": Cohort("product")},
        {
            "vision": queue("vision", "research", 8, 8),
            "speech": queue("speech", "research", 8, 8),
            "search": queue("search", "product", 4),
        },
    )


def job(name: str, queue_name: str, gpus: int, created: float, runtime: float) -> Workload:
    return Workload(
        name, queue_name, (PodSet("main", 1, {GPU: gpus}),), creation_time=created, runtime=runtime
    )


def test_trees_that_end_apart_are_measured_to_the_same_end() -> None:
    # Research borrows and is done by t=500; product keeps a job running for
    # ever, so the whole replay ends at product's last event, and research's
    # idle quota counts until then in both.
    workloads = [
        job("a", "vision", 16, 0, 300),
        job("b", "speech", 4, 10, 100),
        job("c", "vision", 8, 20, 480),
        job("d", "search", 4, 0, math.inf),
        job("e", "search", 4, 5, 900),
    ]
    whole, split = both(two_trees(), workloads, samples=12)
    assert split == whole
    assert whole[1] > 500  # the end is product's, after research was done
    groups = group_simulators(two_trees(), [(w, "c") for w in workloads], samples=12)
    sent = {
        g: from_json(json.loads(json.dumps(to_json(s.run()), allow_nan=False)))
        for g, s in groups.items()
    }
    assert everything(merge(sent)) == whole


def test_queues_that_share_nothing_are_groups_of_their_own() -> None:
    policy = two_trees()
    assert independent_groups(policy) == {
        "vision": "research",
        "speech": "research",
        "search": "product",
    }
    blocking = Policy(
        policy.flavors,
        policy.cohorts,
        policy.cluster_queues,
        wait_for_pods_ready=WaitForPodsReady(timeout=60, block_admission=True),
    )
    # One workload's pods not ready blocks admission everywhere: no split.
    assert set(independent_groups(blocking).values()) == {EVERYTHING}


@pytest.mark.parametrize("requeue_delay", [0.0, 1.0])
def test_a_busy_tree_does_not_move_another_trees_requeue(requeue_delay: float) -> None:
    # Both trees park a job that does not fit. Research frees its capacity
    # first (t=49.5), product half a second later: product's parked job queues
    # again a requeue delay after its own capacity frees, not with research's
    # batch or after it.
    workloads = [
        job("r0", "vision", 16, 0, 49.5),
        job("r1", "vision", 16, 1, 10),
        job("big", "search", 4, 0, 50),
        job("parked", "search", 4, 1, 50),
    ]
    whole, split = both(two_trees(), workloads, requeue_delay=requeue_delay)
    assert split == whole
    assert whole[2]["default/r1"].first_admitted == 49.5 + requeue_delay
    assert whole[2]["default/parked"].first_admitted == 50.0 + requeue_delay
