"""Properties that hold for any policy and any workloads (hypothesis, no database):
usage never exceeds what quota and borrowing allow at any node, a gang is never
partly admitted, no victim has a priority the policy protects, and the result
is deterministic."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    PodSet,
    Policy,
    Preemption,
    QueueingStrategy,
    Quota,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    WithinClusterQueue,
    Workload,
)
from queues.engine.runner import report, run_cycles
from queues.engine.scheduler import Scheduler

FLAVORS = ("f1", "f2")
RESOURCES = ("cpu", "nvidia.com/gpu")


@st.composite
def policies(draw: Any) -> Policy:
    cohorts = {"root": Cohort("root")}
    if draw(st.booleans()):
        cohorts["mid"] = Cohort(
            "mid",
            parent="root",
            resource_groups=(
                ResourceGroup(
                    ("cpu", "nvidia.com/gpu"),
                    (
                        FlavorQuotas(
                            "f1",
                            {
                                "cpu": Quota(draw(st.integers(0, 4)) * 1000),
                                "nvidia.com/gpu": Quota(draw(st.integers(0, 4))),
                            },
                        ),
                    ),
                ),
            ),
        )
    queues = {}
    for i in range(draw(st.integers(1, 4))):
        in_cohort = draw(st.booleans())
        flavors = []
        for flavor in draw(st.sampled_from([("f1",), ("f2",), ("f1", "f2"), ("f2", "f1")])):
            resources = {}
            for resource in RESOURCES:
                nominal = draw(st.integers(0, 8)) * (1000 if resource == "cpu" else 1)
                borrow = draw(st.one_of(st.none(), st.integers(0, 8))) if in_cohort else None
                lend = draw(st.one_of(st.none(), st.integers(0, nominal))) if in_cohort else None
                if borrow is not None and resource == "cpu":
                    borrow *= 1000
                resources[resource] = Quota(nominal, borrow, lend)
            flavors.append(FlavorQuotas(flavor, resources))
        reclaim = draw(st.sampled_from(list(ReclaimWithinCohort)))
        borrow_policy = (
            draw(st.sampled_from(list(BorrowWithinCohort)))
            if reclaim is not ReclaimWithinCohort.NEVER
            else BorrowWithinCohort.NEVER
        )
        queues[f"q{i}"] = ClusterQueue(
            f"q{i}",
            cohort=draw(st.sampled_from(sorted(cohorts))) if in_cohort else None,
            resource_groups=(ResourceGroup(RESOURCES, tuple(flavors)),),
            queueing_strategy=draw(st.sampled_from(list(QueueingStrategy))),
            preemption=Preemption(
                within_cluster_queue=draw(st.sampled_from(list(WithinClusterQueue))),
                reclaim_within_cohort=reclaim,
                borrow_within_cohort=borrow_policy,
                max_priority_threshold=draw(st.one_of(st.none(), st.integers(0, 3)))
                if borrow_policy is not BorrowWithinCohort.NEVER
                else None,
            ),
        )
    return Policy(
        {f: ResourceFlavor(f) for f in FLAVORS}, cohorts, queues, fair_sharing=draw(st.booleans())
    )


def draw_workloads(
    draw: Any, policy: Policy, count: int, latest: int = 5, timed: bool = False
) -> list[Workload]:
    """``count`` workloads in the policy's queues, created by ``latest``; with
    ``timed``, each with a runtime and perhaps a checkpoint interval."""
    workloads = []
    for i in range(count):
        pod_sets = tuple(
            PodSet(
                f"ps{j}",
                draw(st.integers(1, 3)),
                {
                    "cpu": draw(st.integers(0, 3)) * 1000,
                    "nvidia.com/gpu": draw(st.integers(0, 3)),
                },
            )
            for j in range(draw(st.integers(1, 2)))
        )
        workloads.append(
            Workload(
                name=f"w{i}",
                cluster_queue=draw(st.sampled_from(sorted(policy.cluster_queues))),
                pod_sets=pod_sets,
                priority=draw(st.integers(0, 3)),
                creation_time=float(draw(st.integers(0, latest))),
                runtime=float(draw(st.integers(1, 60))) if timed else None,
                checkpoint_interval=draw(st.sampled_from([None, 5.0])) if timed else None,
            )
        )
    return workloads


@st.composite
def scenarios(draw: Any) -> tuple[Policy, list[Workload]]:
    policy = draw(policies())
    return policy, draw_workloads(draw, policy, draw(st.integers(1, 10)))


def run(policy: Policy, workloads: list[Workload]) -> tuple[Scheduler, dict[str, Any], Any]:
    scheduler = Scheduler(policy, copy.deepcopy(workloads))
    result = run_cycles(scheduler, until_stable=True, max_cycles=60)
    return scheduler, report(scheduler, result), result


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(scenarios())
def test_usage_never_exceeds_quota_at_any_node(case: tuple[Policy, list[Workload]]) -> None:
    scheduler, _, _ = run(*case)
    tree = scheduler.tree
    for node in (*tree.queues.values(), *tree.cohorts.values()):
        for fr in node.usage:
            if node.parent is None:
                assert node.usage[fr] <= node.subtree.get(fr, 0), (node, fr)
            else:
                assert node.available(fr) >= 0, (node, fr, node.usage[fr])
            limit = node.borrowing_limit(fr)
            if limit is not None and node.parent is not None:
                assert node.usage[fr] <= node.subtree.get(fr, 0) + limit, (node, fr)


@SETTINGS
@given(scenarios())
def test_a_gang_is_never_partly_admitted(case: tuple[Policy, list[Workload]]) -> None:
    scheduler, _, _ = run(*case)
    for workload in scheduler.workloads.values():
        if workload.admission is None:
            continue
        assert set(workload.admission) == {p.name for p in workload.pod_sets}
        for pod_set in workload.pod_sets:
            requested = {r for r, amount in pod_set.requests.items() if amount}
            assert requested <= set(workload.admission[pod_set.name]), workload.key


@SETTINGS
@given(scenarios())
def test_no_victim_has_a_priority_the_policy_protects(case: tuple[Policy, list[Workload]]) -> None:
    policy, workloads = case
    _, _, result = run(policy, workloads)
    priority = {w.key: w.priority for w in workloads}
    for preemption in result.preempted:
        preemptor_queue = policy.cluster_queues[
            next(w.cluster_queue for w in workloads if w.key == preemption.preemptor)
        ]
        victim_priority = priority[preemption.victim]
        preemptor_priority = priority[preemption.preemptor]
        same_queue = preemption.cluster_queue == preemptor_queue.name
        rule = (
            preemptor_queue.preemption.within_cluster_queue.value
            if same_queue
            else preemptor_queue.preemption.reclaim_within_cohort.value
        )
        assert rule != "Never", preemption
        if rule == "LowerPriority":
            assert victim_priority < preemptor_priority, preemption
        if rule == "LowerOrNewerEqualPriority":
            assert victim_priority <= preemptor_priority, preemption
        if preemption.reason.value == "InCohortReclaimWhileBorrowing":
            threshold = preemptor_queue.preemption.max_priority_threshold
            assert victim_priority < preemptor_priority
            assert threshold is None or victim_priority <= threshold


@SETTINGS
@given(scenarios())
def test_the_cycle_result_is_deterministic(case: tuple[Policy, list[Workload]]) -> None:
    _, first, _ = run(*case)
    _, second, _ = run(*case)
    assert first == second
