"""Explanations: what is short, by how much and why, whether preemption could
help, and the smallest change that would let the workload in (no database)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from queues.engine.explain import explain
from queues.engine.runner import report, run_cycles, scheduler_for
from queues.engine.scenario import parse
from queues.engine.scheduler import CycleResult

GPU = "nvidia.com/gpu"


def queue(name: str, nominal: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "cohortName": "c",
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "h100", "resources": [{"name": GPU, "nominalQuota": nominal, **extra}]}
                ],
            }
        ],
    }


def scheduled(workloads: list[dict[str, Any]], *queues: dict[str, Any]) -> Any:
    scenario = parse(
        {
            "resourceFlavors": [
                {"name": "h100"},
                {"name": "spot", "nodeTaints": [{"key": "spot", "effect": "NoSchedule"}]},
            ],
            "cohorts": [{"name": "c"}],
            "clusterQueues": list(queues),
            "workloads": workloads,
        }
    )
    scheduler = scheduler_for(scenario)
    run_cycles(scheduler, until_stable=True)
    return scheduler


def gpus(name: str, queue_name: str, count: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": queue_name,
        "podSets": [{"count": count, "requests": {GPU: 1}}],
        **extra,
    }


def test_shortfall_names_the_numbers_and_the_blocking_workload() -> None:
    scheduler = scheduled(
        [gpus("running", "b", 6, creationTime=0), gpus("waiting", "a", 6, creationTime=1)],
        queue("a", 4),
        queue("b", 4),
    )
    result = explain(scheduler, "default/waiting")
    assert result.status == "pending" and result.reason == "WaitingForQuota"
    [short] = result.shortfalls
    assert (short.flavor, short.resource, short.requested, short.available, short.short_by) == (
        "h100",
        GPU,
        "6",
        "2",
        "4",
    )
    assert (short.nominal, short.queue_usage, short.cohort_available) == ("4", "0", "2")
    assert not short.never_fits
    kinds = {s.kind: s for s in result.suggestions}
    assert kinds["wait-for"].details == {"workload": "default/running"}
    assert kinds["fewer-resources"].details["fits_now"] == "2"
    assert kinds["raise-quota"].details["by"] == "4"
    assert "6 nvidia.com/gpu in flavor h100; 2 is free to it" in result.message
    assert result.position == 1


def test_never_fits_says_so_and_proposes_the_borrowing_limit() -> None:
    scheduler = scheduled([gpus("huge", "a", 10)], queue("a", 4, borrowingLimit=2), queue("b", 8))
    result = explain(scheduler, "default/huge")
    assert result.reason == "ExceedsMaxQuota"
    assert result.shortfalls[0].never_fits and result.shortfalls[0].maximum == "6"
    kinds = {s.kind: s for s in result.suggestions}
    assert kinds["raise-borrowing-limit"].details["by"] == "4"
    assert "can never have more than 6" in result.message


def test_preemption_protection_is_explained() -> None:
    scheduler = scheduled(
        [
            gpus("important", "a", 4, priority=100, creationTime=0),
            gpus("newcomer", "a", 4, priority=10, creationTime=1),
        ],
        queue("a", 4) | {"preemption": {"withinClusterQueue": "LowerPriority"}},
    )
    result = explain(scheduler, "default/newcomer")
    assert result.preemption["considered"] is True
    assert result.preemption["protected"] == [
        {
            "workload": "default/important",
            "cluster_queue": "a",
            "why": "priority 100 is not lower than 10",
        }
    ]


def test_a_flavor_blocked_by_a_taint_is_suggested() -> None:
    q = queue("a", 0)
    q["resourceGroups"][0]["flavors"].insert(
        0, {"name": "spot", "resources": [{"name": GPU, "nominalQuota": 8}]}
    )
    scheduler = scheduled([gpus("w", "a", 2)], q)
    result = explain(scheduler, "default/w")
    assert result.skipped_flavors == {
        "spot": "untolerated taint {spot  NoSchedule <nil>} in flavor spot"
    }
    assert any(
        s.kind == "other-flavor" and s.details["flavor"] == "spot" for s in result.suggestions
    )


def test_admitted_and_reserved_workloads_say_what_they_wait_for() -> None:
    gated = queue("a", 8) | {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "berth-approval"}]}
    }
    scheduler = scheduled([gpus("w", "a", 2)], gated, queue("b", 8))
    result = explain(scheduler, "default/w")
    assert result.status == "quota-reserved"
    assert "berth-approval" in result.message


def test_start_estimate_brackets_the_running_workloads_remaining_time() -> None:
    from queues.engine.estimate import estimate_start

    scheduler = scheduled(
        [
            gpus("running", "a", 8, runtime=1000, creationTime=0),
            gpus("next", "a", 8, runtime=100, creationTime=1),
            gpus("forever", "b", 8, creationTime=0),
            gpus("stuck", "b", 8, creationTime=1),
        ],
        queue("a", 8),
        {k: v for k, v in queue("b", 8).items() if k != "cohortName"},  # nobody to borrow from
    )
    scheduler.now = 400.0  # running has 600 s of its 1000 s left
    estimate = estimate_start(scheduler, "default/next")
    # It queues again a second after running ends (Kueue's requeue delay).
    assert estimate.latest == 1001.0
    assert estimate.earliest == 701.0  # if running ends in half its remaining time
    # Behind a workload that declares no runtime, with nobody to borrow from.
    assert estimate_start(scheduler, "default/stuck").latest is None
    # The scheduler's own state is untouched.
    assert scheduler.workloads["default/next"].admission is None


def test_estimating_every_pending_workload_at_once_agrees_with_one_at_a_time() -> None:
    from queues.engine.estimate import estimate_all, estimate_start

    scheduler = scheduled(
        [
            gpus("running", "a", 8, runtime=1000, creationTime=0),
            gpus("next", "a", 8, runtime=100, creationTime=1),
            gpus("after", "a", 8, runtime=100, creationTime=2),
            gpus("forever", "b", 8, creationTime=0),
            gpus("stuck", "b", 8, creationTime=1),
        ],
        queue("a", 8),
        {k: v for k, v in queue("b", 8).items() if k != "cohortName"},
    )
    scheduler.now = 400.0
    every = estimate_all(scheduler)
    assert set(every) == {"default/next", "default/after", "default/stuck"}
    for key, estimate in every.items():
        assert estimate == estimate_start(scheduler, key), key
    assert every["default/after"].latest == 1102.0  # behind next's 100 s, and a requeue


def test_fits_now_is_promised_the_next_cycle_only_when_that_cycle_admits_it() -> None:
    # After one cycle b-low has been preempted for p; both fit the freed GPUs, but
    # the next cycle considers p first (it does not borrow) and p takes them.
    path = Path(__file__).parent / "scenarios" / "preempt_reclaim_lower_priority.yaml"
    document = yaml.safe_load(path.read_text())
    for key in ("rule", "expect"):
        document.pop(key)
    scheduler = scheduler_for(parse(document, str(path)))
    run_cycles(scheduler, until_stable=False)
    before = report(scheduler, CycleResult())

    winner = explain(scheduler, "default/p")
    assert winner.next_cycle["outcome"] == "admitted"
    assert winner.message == "Fits now; it will be admitted in the next scheduling cycle."

    loser = explain(scheduler, "default/b-low")
    assert "next scheduling cycle." not in loser.message
    assert loser.next_cycle["outcome"] == "pending"
    assert loser.next_cycle["reason"] == "WaitingForQuota"
    assert loser.next_cycle["taken_by"] == [
        {
            "workload": "default/p",
            "cluster_queue": "a",
            "outcome": "admitted",
            "flavor_resources": [{"flavor": "default", "resource": GPU}],
        }
    ]
    assert "considers default/p (ClusterQueue a, admitted" in loser.message
    assert loser.as_dict()["next_cycle"]["taken_by"][0]["workload"] == "default/p"

    # The rehearsal ran on a copy; the real next cycles agree with it.
    assert report(scheduler, CycleResult()) == before
    run_cycles(scheduler, until_stable=True)
    assert scheduler.workloads["default/p"].admission is not None
    assert scheduler.workloads["default/b-low"].admission is None
    assert scheduler.status["default/b-low"].reason == "WaitingForQuota"


def test_a_workload_with_no_declared_runtime_is_played_at_both_ends_of_its_range() -> None:
    from queues.engine.estimate import Pace, estimate_start

    scheduler = scheduled(
        [gpus("running", "a", 8, creationTime=0), gpus("next", "a", 8, creationTime=1)],
        {k: v for k, v in queue("a", 8).items() if k != "cohortName"},
    )
    scheduler.now = 400.0
    assert estimate_start(scheduler, "default/next").latest is None  # it might run forever
    # Admitted at 0 (what sync saw), it has run 400 s: similar work ran 500 to 3000 s in all.
    scheduler.workloads["default/running"].admitted_at = 0.0
    scheduler.workloads["default/running"].runtime_range = (500.0, 3000.0)
    estimate = estimate_start(scheduler, "default/next")
    assert (estimate.earliest, estimate.latest) == (501.0, 3001.0)  # and a requeue's second
    # On a cluster that requeues at once (the simulated one), no second.
    at_once = estimate_start(scheduler, "default/next", pace=Pace(0.0, 0.0))
    assert (at_once.earliest, at_once.latest) == (500.0, 3000.0)


def test_the_latest_start_foresees_the_expected_arrivals_the_earliest_does_not() -> None:
    from queues.engine.estimate import Pace, estimate_start
    from queues.engine.model import PodSet, Workload

    alone = {k: v for k, v in queue("a", 8).items() if k != "cohortName"}
    scheduler = scheduled(
        [
            gpus("first", "a", 4, runtime=100, creationTime=0),
            gpus("second", "a", 4, runtime=200, creationTime=0),
            gpus("big", "a", 8, runtime=100, creationTime=1),
        ],
        alone,
    )
    scheduler.now = 0.0
    pace = Pace(0.0, 0.0)
    alone_estimate = estimate_start(scheduler, "default/big", pace=pace)
    assert (alone_estimate.earliest, alone_estimate.latest) == (100.0, 200.0)
    # Smaller work expected at 50 takes each half as it frees, ahead of "big",
    # which does not fit half (BestEffortFIFO): big starts when the last ends.
    coming = [
        Workload(
            name=f"small-{i}",
            cluster_queue="a",
            pod_sets=(PodSet("main", 4, {GPU: 1}),),
            creation_time=50.0 + i,
            runtime=300.0,
        )
        for i in range(2)
    ]
    estimate = estimate_start(scheduler, "default/big", pace=pace, arrivals=coming)
    assert (estimate.earliest, estimate.latest) == (100.0, 500.0)


def test_a_start_range_is_ordered_whichever_run_starts_it_first() -> None:
    from queues.engine.estimate import StartEstimate

    assert StartEstimate.between(8.0, 2.0) == StartEstimate(2.0, 8.0)
    assert StartEstimate.between(2.0, None) == StartEstimate(2.0, None)


def test_work_waiting_for_an_approval_holds_its_quota_until_the_approval_is_due() -> None:
    from queues.engine.estimate import Pace, estimate_start
    from queues.engine.model import CheckState

    gated = {k: v for k, v in queue("a", 8).items() if k != "cohortName"} | {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "berth-approval"}]}
    }
    scheduler = scheduled(
        [
            gpus("reserved", "a", 8, runtime=100, creationTime=0),
            gpus("next", "a", 8, runtime=100, creationTime=1),
        ],
        gated,
    )
    scheduler.now = 0.0
    reserved = scheduler.workloads["default/reserved"]
    assert reserved.admission is not None
    assert reserved.check_states == {"berth-approval": CheckState.PENDING}
    # Earliest: approvals at once, "reserved" runs its whole 100 s (it has not
    # started: no share of it is done). Latest: its approval is due in an hour,
    # it runs 100 s, then "next" waits for its own approval, up to 4 h.
    pace = Pace(0.0, 0.0, check_wait=4 * 3600.0, check_left={"default/reserved": 3600.0})
    estimate = estimate_start(scheduler, "default/next", pace=pace)
    assert (estimate.earliest, estimate.latest) == (100.0, 3700.0 + 4 * 3600.0)


def test_a_gang_that_fits_the_quota_but_not_one_rack_is_told_so() -> None:
    path = Path(__file__).parent / "scenarios" / "tas_required_rack_no_rack_has_room.yaml"
    document = yaml.safe_load(path.read_text())
    for key in ("rule", "expect"):
        document.pop(key)
    scheduler = scheduler_for(parse(document))
    run_cycles(scheduler, until_stable=False)
    explanation = explain(scheduler, "default/gang")
    assert explanation.shortfalls == []
    assert explanation.placement == ['topology "default" allows to fit only 1 out of 2 pod(s)']
    assert explanation.message.startswith(
        "Pending: the quota has room, but its pods find no place together: "
        'topology "default" allows to fit only 1 out of 2 pod(s).'
    )


def _behind_a_big_head(strategy: str) -> Any:
    """``small`` (1 GPU) waits third in ``a`` (4 GPUs): ``running`` takes 3,
    then ``big`` (4) cannot fit. No cycle has run yet."""
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "cohorts": [{"name": "c"}],
            "clusterQueues": [queue("a", 4, borrowingLimit=0) | {"queueingStrategy": strategy}],
            "workloads": [
                gpus("running", "a", 3, creationTime=0),
                gpus("big", "a", 4, creationTime=1),
                gpus("small", "a", 1, creationTime=2),
            ],
        }
    )
    return scheduler_for(scenario)


def test_strict_fifo_head_that_cannot_fit_means_the_one_behind_does_not_fit_now() -> None:
    scheduler = _behind_a_big_head("StrictFIFO")
    result = explain(scheduler, "default/small")
    assert result.position == 3
    assert result.next_cycle["outcome"] == "not-considered"
    assert result.message.startswith("Its quota is free, but it is number 3 in ClusterQueue a")
    assert "no scheduling cycle reaches it yet" in result.message
    # What Kueue then does: nothing passes the head.
    run_cycles(scheduler, until_stable=True)
    assert scheduler.workloads["default/small"].admission is None


def test_best_effort_head_that_cannot_fit_lets_the_one_behind_in() -> None:
    scheduler = _behind_a_big_head("BestEffortFIFO")
    result = explain(scheduler, "default/small")
    assert result.position == 3
    assert result.next_cycle["outcome"] == "admitted"
    assert "reach and admit it" in result.message
    run_cycles(scheduler, until_stable=True)
    assert scheduler.workloads["default/small"].admission is not None


def test_a_twin_of_equal_priority_and_age_is_protected_under_lower_or_newer_equal() -> None:
    scheduler = scheduled(
        [
            gpus(
                "twin",
                "a",
                4,
                priority=5,
                creationTime=10,
                admittedAt=11,
                admission={"main": {GPU: "h100"}},
            ),
            gpus("p", "a", 2, priority=5, creationTime=10),
        ],
        queue("a", 4, borrowingLimit=0)
        | {"preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority"}},
    )
    result = explain(scheduler, "default/p")
    assert result.preemption["protected"] == [
        {
            "workload": "default/twin",
            "cluster_queue": "a",
            "why": "priority 5 is not lower than 5 and it is not newer",
        }
    ]


def _one_pod(name: str, gpus_per_pod: int, created: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": "a",
        "creationTime": created,
        "podSets": [{"count": 1, "requests": {GPU: gpus_per_pod}}],
        **extra,
    }


def _behind_a_head_no_node_holds(strategy: str) -> Any:
    """On a topology-aware flavor: two nodes of 8 GPUs each run 6, so ``a``'s
    quota (16) has room for ``whole`` (one pod of 4 GPUs) but no node has;
    ``small`` (one of 1) waits behind it and fits both. No cycle has run yet."""
    running = [
        _one_pod(
            f"running-{node}",
            6,
            0,
            admittedAt=0,
            admission={"main": {GPU: "h100"}},
            topologyAssignment={"main": {node: 1}},
        )
        for node in ("n-0", "n-1")
    ]
    a = {k: v for k, v in queue("a", 16).items() if k != "cohortName"}
    scenario = parse(
        {
            "topologies": [{"name": "hosts", "levels": [{"nodeLabel": "kubernetes.io/hostname"}]}],
            "resourceFlavors": [{"name": "h100", "topologyName": "hosts"}],
            "nodes": [{"name": "n", "count": 2, "capacity": {GPU: 8}}],
            "clusterQueues": [a | {"queueingStrategy": strategy}],
            "workloads": [*running, _one_pod("whole", 4, 1), _one_pod("small", 1, 2)],
        }
    )
    return scheduler_for(scenario)


def test_strict_fifo_head_no_node_holds_means_the_one_behind_does_not_fit_now() -> None:
    """The demo's research queue on its rack-aware flavor: a head that fits the
    quota but no node blocks a StrictFIFO queue, so the small job behind it,
    which fits the quota and the nodes, is not promised the next cycle."""
    scheduler = _behind_a_head_no_node_holds("StrictFIFO")
    head = explain(scheduler, "default/whole")
    assert head.placement == ['topology "hosts" doesn\'t allow to fit any of 1 pod(s)']
    result = explain(scheduler, "default/small")
    assert (result.position, result.reason) == (2, "Fits")
    assert result.next_cycle["outcome"] == "not-considered"
    assert "no scheduling cycle reaches it yet" in result.message
    run_cycles(scheduler, until_stable=True)
    assert scheduler.workloads["default/small"].admission is None


def test_best_effort_head_no_node_holds_lets_the_one_behind_in() -> None:
    scheduler = _behind_a_head_no_node_holds("BestEffortFIFO")
    result = explain(scheduler, "default/small")
    assert result.next_cycle["outcome"] == "admitted"
    run_cycles(scheduler, until_stable=True)
    assert scheduler.workloads["default/small"].admission is not None
    assert scheduler.workloads["default/whole"].admission is None
