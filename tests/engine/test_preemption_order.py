"""Victim order with jobs still stopping: a workload already evicted (its job
stopping, its quota still held) is taken as a victim before any running one,
whatever its priority or admission time, as Kueue orders candidates (no
database)."""

from __future__ import annotations

from typing import Any

import pytest

from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler

GPU = "nvidia.com/gpu"


def job(name: str, priority: int, created: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": "q",
        "priority": priority,
        "creationTime": created,
        "podSets": [{"requests": {GPU: 2}}],
        **extra,
    }


def running(name: str, priority: int, admitted: float) -> dict[str, Any]:
    return job(name, priority, 0, admittedAt=admitted, admission={"main": {GPU: "h100"}})


@pytest.mark.parametrize("fair_sharing", [False, True], ids=["classic", "fair-sharing"])
def test_a_still_evicting_workload_is_the_victim_before_a_running_one(fair_sharing: bool) -> None:
    document: dict[str, Any] = {
        "resourceFlavors": [{"name": "h100"}],
        "clusterQueues": [
            {
                "name": "q",
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4}]}
                        ],
                    }
                ],
            }
        ],
        "workloads": [
            running("old", 0, admitted=1),
            running("filler", 5, admitted=1),
            job("first", 1, 2),
            job("young", 0, 3),
            job("second", 1, 4),
        ],
    }
    if fair_sharing:
        document["fairSharing"] = {"enable": True}
    scenario = parse(document)
    by_name = {w.name: w for w in scenario.workloads}
    scheduler = Scheduler(scenario.policy)
    scheduler.defer_release = True  # victims keep their quota until their job has stopped
    scheduler.add(by_name["old"])
    scheduler.add(by_name["filler"])

    # "first" preempts "old" (filler has a higher priority); old's job is stopping.
    scheduler.add(by_name["first"])
    assert [p.victim for p in scheduler.cycle(now=2).preempted] == ["default/old"]
    old = scheduler.workloads["default/old"]
    assert old.evicting and old.admission is not None

    # "first" is deleted and filler ends: "young" takes the two free GPUs, so q
    # holds old (evicting, admitted at 1) and young (running, admitted at 3).
    scheduler.finish("default/first")
    scheduler.finish("default/filler")
    scheduler.add(by_name["young"])
    assert list(scheduler.cycle(now=3).admitted) == ["default/young"]

    # Same priority: without evicted-first, young (admitted more recently) would be
    # the victim. Old is chosen; it is already on its way out, so nothing new is
    # preempted and young keeps running.
    scheduler.add(by_name["second"])
    result = scheduler.cycle(now=4)
    assert result.preempted == [] and result.admitted == {}
    status = scheduler.status["default/second"]
    assert status.reason == "WaitingForPreemptedWorkloads"
    assert "Pending the preemption of 1 workload(s)" in status.message
    young = scheduler.workloads["default/young"]
    assert not young.evicting and young.admission is not None

    # Old's job stops: its quota goes to second; young is untouched.
    scheduler.release("default/old")
    assert list(scheduler.cycle(now=5).admitted) == ["default/second"]
    assert young.admission is not None and not young.evicting


def test_an_evicting_workload_in_the_own_queue_goes_before_a_running_one_elsewhere() -> None:
    # Other queues' candidates normally go first; an evicted one goes before both.
    def queue(name: str, nominal: int, **extra: Any) -> dict[str, Any]:
        flavors = [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": nominal}]}]
        return {
            "name": name,
            "cohortName": "c",
            "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}],
            **extra,
        }

    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "cohorts": [{"name": "c"}],
            "clusterQueues": [queue("q", 4, preemption=preemption), queue("b", 0)],
            "workloads": [
                running("old", 0, admitted=1),
                running("filler", 5, admitted=1),
                job("first", 1, 2),
                job("borrower", 0, 3) | {"clusterQueue": "b"},
                job("second", 1, 4),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    scheduler = Scheduler(scenario.policy)
    scheduler.defer_release = True
    for name in ("old", "filler", "first"):
        scheduler.add(by_name[name])
    assert [p.victim for p in scheduler.cycle(now=2).preempted] == ["default/old"]
    scheduler.finish("default/first")
    scheduler.finish("default/filler")
    # b (nominal 0) borrows the two GPUs q does not use.
    scheduler.add(by_name["borrower"])
    assert list(scheduler.cycle(now=3).admitted) == ["default/borrower"]

    scheduler.add(by_name["second"])
    result = scheduler.cycle(now=4)
    assert result.preempted == []
    assert scheduler.status["default/second"].reason == "WaitingForPreemptedWorkloads"
    borrower = scheduler.workloads["default/borrower"]
    assert not borrower.evicting and borrower.admission is not None
    scheduler.release("default/old")
    assert list(scheduler.cycle(now=5).admitted) == ["default/second"]
    assert borrower.admission is not None


def test_candidates_are_only_holders_of_a_contested_flavor_resource() -> None:
    """Kueue only takes as candidates workloads using a resource the
    preemptor contests: a holder of another flavor frees nothing there. Its
    victim walk would put such a one back (nothing here fails without the
    filter), so the gathering itself is pinned."""
    flavors = [
        {"name": name, "resources": [{"name": GPU, "nominalQuota": 2}]} for name in ("a100", "h100")
    ]
    scenario = parse(
        {
            "resourceFlavors": [{"name": "a100"}, {"name": "h100"}],
            "clusterQueues": [
                {
                    "name": "q",
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}],
                }
            ],
            "workloads": [
                job("on-a100", 0, 0, admittedAt=1, admission={"main": {GPU: "a100"}}),
                job("on-h100", 0, 0, admittedAt=1, admission={"main": {GPU: "h100"}}),
                job("urgent", 5, 2),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    scheduler = Scheduler(scenario.policy)
    for name in ("on-a100", "on-h100", "urgent"):
        scheduler.add(by_name[name])
    search = scheduler.preemptor_for(set())
    urgent = by_name["urgent"]
    a100, h100 = ("a100", GPU), ("h100", GPU)
    assert [w.name for w in search._using("q", urgent, {a100})] == ["on-a100"]
    assert [w.name for w in search._using("q", urgent, {h100})] == ["on-h100"]
    assert [w.name for w in search._using("q", urgent, {a100, h100})] == ["on-a100", "on-h100"]
    assert [w.name for w in search._using("q", urgent, {("a100", "cpu")})] == []
    # Itself and those excluded (admitted earlier in the cycle) are never candidates.
    assert search._using("q", by_name["on-a100"], {a100}) == []
    excluding = scheduler.preemptor_for({"default/on-h100"})
    assert excluding._using("q", urgent, {a100, h100}) == [by_name["on-a100"]]
