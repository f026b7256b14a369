"""Why a workload may not be preempted, rule by rule, as explain says it (the
classic search's ``protection``; no database): a stopped queue, a policy of
Never, a queue within its nominal quota, a priority not lower (and, for
LowerOrNewerEqualPriority, not newer)."""

from __future__ import annotations

from typing import Any

from queues.engine.explain import explain
from tests.engine.test_explain import GPU, gpus, queue, scheduled


def running(name: str, queue_name: str, count: int, **extra: Any) -> dict[str, Any]:
    extra.setdefault("creationTime", 0)
    extra.setdefault("admittedAt", 1)
    return gpus(name, queue_name, count, admission={"main": {GPU: "h100"}}, **extra)


def protected(workloads: list[dict[str, Any]], *queues: dict[str, Any]) -> list[dict[str, str]]:
    result = explain(scheduled(workloads, *queues), "default/p")
    assert result.status == "pending", result
    assert result.preemption["considered"] is True
    return list(result.preemption["protected"])


def borrower_case(
    policy: dict[str, str], holder_priority: int = 10, **b: Any
) -> list[dict[str, str]]:
    """b runs 6 of the cohort's 8 GPUs (2 borrowed from a); p asks a for 4."""
    return protected(
        [
            running("big", "b", 6, priority=holder_priority),
            gpus("p", "a", 4, priority=10, creationTime=5),
        ],
        queue("a", 4) | {"preemption": policy},
        queue("b", 4) | b,
    )


def test_withinclusterqueue_never_and_a_lender_within_its_nominal_quota_protect() -> None:
    assert protected(
        [
            running("mine", "a", 2, priority=0),
            running("theirs", "b", 4, priority=0),
            gpus("p", "a", 4, priority=10, creationTime=5),
        ],
        queue("a", 4) | {"preemption": {"reclaimWithinCohort": "Any"}},
        queue("b", 4),
    ) == [
        {
            "workload": "default/mine",
            "cluster_queue": "a",
            "why": "withinClusterQueue is Never",
        },
        {
            "workload": "default/theirs",
            "cluster_queue": "b",
            "why": "cluster queue b is within its nominal quota",
        },
    ]


def test_reclaimwithincohort_never_protects_a_borrower() -> None:
    assert borrower_case({"reclaimWithinCohort": "Never"}, holder_priority=0) == [
        {"workload": "default/big", "cluster_queue": "b", "why": "reclaimWithinCohort is Never"}
    ]


def test_a_borrower_of_equal_priority_is_protected_by_lowerpriority() -> None:
    assert borrower_case({"reclaimWithinCohort": "LowerPriority"}) == [
        {"workload": "default/big", "cluster_queue": "b", "why": "priority 10 is not lower than 10"}
    ]


def test_a_stopped_queue_protects_its_workloads_whatever_the_policy() -> None:
    assert borrower_case({"reclaimWithinCohort": "Any"}, holder_priority=0, stopPolicy="Hold") == [
        {"workload": "default/big", "cluster_queue": "b", "why": "cluster queue b is stopped"}
    ]


def test_within_the_queue_a_workload_the_rule_allows_is_not_protected() -> None:
    assert protected(
        [
            running("old-twin", "a", 2, priority=10, creationTime=9),
            running("important", "a", 2, priority=11),
            gpus("p", "a", 4, priority=10, creationTime=5),
        ],
        queue("a", 4, borrowingLimit=0)
        | {"preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority"}},
    ) == [
        {
            "workload": "default/important",
            "cluster_queue": "a",
            "why": "priority 11 is not lower than 10",
        }
    ]


def test_a_borrower_reclaim_any_may_take_is_not_protected_though_the_preemptor_waits() -> None:
    """reclaimWithinCohort Any allows b's borrower; p still waits, because a may
    not borrow and its own workload is protected: only that one is listed."""
    assert protected(
        [
            running("mine", "a", 4, priority=0),
            running("big", "b", 6, priority=0),
            gpus("p", "a", 4, priority=10, creationTime=5),
        ],
        queue("a", 4, borrowingLimit=0) | {"preemption": {"reclaimWithinCohort": "Any"}},
        queue("b", 4),
        queue("lender", 4),
    ) == [{"workload": "default/mine", "cluster_queue": "a", "why": "withinClusterQueue is Never"}]
