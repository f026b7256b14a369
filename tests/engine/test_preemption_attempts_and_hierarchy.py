"""Classic preemption's attempts and hierarchical search, pinned against Kueue
v0.19 (pkg/scheduler/preemption: preemption.go's classicalPreemptions,
classical/candidate_generator.go and classical/hierarchical_preemption.go),
and steps both searches share: the victim order's tie-breaks, the fit test and
who may be a candidate at all (no database).

The attempts: Kueue tries "with borrowing" only, when no other queue has a
candidate or when borrowWithinCohort is Never and the preemptor's queue is not
strictly under its nominal quota in every contested resource; "without
borrowing, then with" when borrowWithinCohort is Never and no candidate has the
hierarchical advantage; "with, then without" otherwise.

The hierarchy: walking from the preemptor's queue up to the root, a request that
fits a node's quota gives the preemptor the hierarchical advantage over every
candidate found above that node (reason InCohortReclamation, whatever
borrowWithinCohort says); each level skips the subtree searched before it, and
what the node keeps for itself (lendingLimit) is deducted before asking its
parent.

Each test says who is preempted and with which reason (Kueue's Preempted
condition reason), and, where it matters, why the rule changes the outcome.
"""

from __future__ import annotations

from typing import Any

from queues.engine.model import FlavorResource
from queues.engine.runner import scheduler_for
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler

GPU = "nvidia.com/gpu"
CPU = "cpu"

Quota = int | dict[str, int]


def cq(
    name: str, cohort: str | None, quotas: dict[str, Quota], **preemption: Any
) -> dict[str, Any]:
    """A ClusterQueue with one flavor ("default") covering ``quotas``' resources;
    a quota is a nominal quota or a dict of nominalQuota and limits."""
    resources = [
        {"name": resource, "nominalQuota": quota}
        if isinstance(quota, int)
        else {"name": resource, **quota}
        for resource, quota in quotas.items()
    ]
    queue: dict[str, Any] = {
        "name": name,
        "resourceGroups": [
            {
                "coveredResources": list(quotas),
                "flavors": [{"name": "default", "resources": resources}],
            }
        ],
    }
    if cohort is not None:
        queue["cohortName"] = cohort
    if preemption:
        queue["preemption"] = preemption
    return queue


def cohort(name: str, parent: str | None = None, **quotas: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if parent is not None:
        entry["parentName"] = parent
    if quotas:
        resources = {GPU if r == "gpu" else r: n for r, n in quotas.items()}
        entry["resourceGroups"] = [
            {
                "coveredResources": list(resources),
                "flavors": [
                    {
                        "name": "default",
                        "resources": [{"name": r, "nominalQuota": n} for r, n in resources.items()],
                    }
                ],
            }
        ]
    return entry


def running(
    name: str,
    queue: str,
    requests: dict[str, int],
    priority: int = 0,
    admitted: float | None = 1,
) -> dict[str, Any]:
    """A workload holding quota in ``queue`` since ``admitted`` (None: no time)."""
    workload: dict[str, Any] = {
        "name": name,
        "clusterQueue": queue,
        "priority": priority,
        "creationTime": 0,
        "podSets": [{"requests": requests}],
        "admission": {"main": {resource: "default" for resource in requests}},
    }
    if admitted is not None:
        workload["admittedAt"] = admitted
    return workload


def waiting(name: str, queue: str, requests: dict[str, int], priority: int = 10) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": queue,
        "priority": priority,
        "creationTime": 10,
        "podSets": [{"requests": requests}],
    }


def scheduler_of(
    queues: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    cohorts: list[dict[str, Any]] | None = None,
    *,
    fair_sharing: bool = False,
) -> Scheduler:
    document: dict[str, Any] = {
        "resourceFlavors": [{"name": "default"}],
        "cohorts": cohorts if cohorts is not None else [{"name": "c"}],
        "clusterQueues": queues,
        "workloads": workloads,
    }
    if fair_sharing:
        document["fairSharing"] = {"enable": True}
    return scheduler_for(parse(document))


def one_cycle(
    queues: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    cohorts: list[dict[str, Any]] | None = None,
    *,
    fair_sharing: bool = False,
    now: float | None = None,
) -> tuple[dict[str, str], Scheduler]:
    """One scheduling cycle: each victim's name with its Preempted reason."""
    scheduler = scheduler_of(queues, workloads, cohorts, fair_sharing=fair_sharing)
    result = scheduler.cycle(now=now)
    assert result.admitted == {}, result.admitted
    victims = {p.victim.removeprefix("default/"): str(p.reason) for p in result.preempted}
    return victims, scheduler


def waits_for_victims(scheduler: Scheduler, name: str = "p") -> bool:
    return scheduler.status[f"default/{name}"].reason == "WaitingForPreemptedWorkloads"


# borrowWithinCohort left out of both: Never.
NEVER_BORROW = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
RECLAIM_ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


# ------------------------------------------------------------------ the attempts


def test_without_candidates_in_other_queues_only_the_borrowing_attempt_runs() -> None:
    """NoCandidateFromOtherQueues: a single attempt, with borrowing, even though
    borrowWithinCohort is Never and the queue is under its nominal quota. Tried
    without borrowing first, p would take both of its queue's workloads to fit
    in its nominal 4; with borrowing, the newer one is enough."""
    victims, scheduler = one_cycle(
        [cq("a", "c", {GPU: 4}, **NEVER_BORROW), cq("b", "c", {GPU: 4})],
        [
            running("a-old", "a", {GPU: 1}, admitted=1),
            running("a-new", "a", {GPU: 1}, admitted=2),
            running("b-within", "b", {GPU: 3}),  # within b's nominal: no candidate
            waiting("p", "a", {GPU: 4}),
        ],
    )
    # 5 of 8 used; p needs 4. Without a-new, 4 are free (p borrows 1 of b's unused).
    assert victims == {"a-new": "InClusterQueue"}
    assert waits_for_victims(scheduler)


def test_borrowing_forbidden_tries_without_borrowing_first_when_no_candidate_is_hierarchical() -> (
    None
):
    """borrowWithinCohort Never, under nominal, another queue's borrower a
    candidate, none with the hierarchical advantage: the attempt without
    borrowing runs first and wins even though the one with borrowing would have
    needed fewer victims. p must fit in a's nominal 4, so both of a's workloads
    go; b's borrower is given back by the fill-back."""
    victims, scheduler = one_cycle(
        [
            cq("a", "c", {GPU: 4}, **NEVER_BORROW),
            cq("b", "c", {GPU: 2}),
            cq("lender", "c", {GPU: 4}),
        ],
        [
            running("a-old", "a", {GPU: 1}, admitted=1),
            running("a-new", "a", {GPU: 1}, admitted=2),
            running("b-borrower", "b", {GPU: 5}),
            waiting("p", "a", {GPU: 4}),
        ],
    )
    # 7 of 10 used, 3 free. With borrowing allowed, a-new alone would free 4.
    assert victims == {"a-old": "InClusterQueue", "a-new": "InClusterQueue"}
    assert waits_for_victims(scheduler)


def test_borrowing_forbidden_at_nominal_runs_only_the_borrowing_attempt() -> None:
    """borrowWithinCohort Never and the queue at (not strictly under) its nominal
    quota in a contested resource: only the attempt with borrowing runs, where a
    reclaim-without-borrowing candidate is never valid. Here it cannot fit: the
    cpu b borrows is what p lacks, and p may not take it, so nobody is
    preempted. (Kueue compares usage < nominal: a at 4 of 4 gpu is not under.)"""
    victims, scheduler = one_cycle(
        [
            cq("a", "c", {GPU: 4, CPU: 8}, **RECLAIM_ANY),
            cq("b", "c", {GPU: 4, CPU: 0}),
        ],
        [
            running("a-low", "a", {GPU: 4, CPU: 2}),
            running("b-gpu", "b", {GPU: 4}),
            running("b-cpu", "b", {CPU: 6}),  # borrows 6 of a's cpu
            waiting("p", "a", {GPU: 2, CPU: 4}),
        ],
    )
    # Both gpu (8 of 8) and cpu (8 of 8) are contested. Allowing borrowing, only a-low
    # may go: 4 gpu but only 2 cpu free. Without borrowing (not tried), b-cpu and
    # a-low would have made room.
    assert victims == {}
    status = scheduler.status["default/p"]
    assert status.reason == "WaitingForQuota"


def test_a_resource_the_queue_has_never_used_counts_as_under_nominal() -> None:
    """The queue is under nominal when usage < nominal in every contested
    resource, a resource it has never used counting as 0. a uses no gpu (nominal
    1) and 2 of 4 cpu: under, so with borrowWithinCohort Never and no
    hierarchical candidate the attempt without borrowing runs (first) and takes
    b's borrower and a's own workload."""
    victims, scheduler = one_cycle(
        [
            cq("a", "c", {GPU: 1, CPU: 4}, **RECLAIM_ANY),
            cq("b", "c", {GPU: 0, CPU: 0}),
        ],
        [
            running("a-own", "a", {CPU: 2}),
            running("b-borrower", "b", {GPU: 1, CPU: 2}),
            waiting("p", "a", {GPU: 1, CPU: 4}),
        ],
    )
    # Allowing borrowing only, b's borrower may not go and 0 gpu would stay free.
    assert victims == {"b-borrower": "InCohortReclamation", "a-own": "InClusterQueue"}
    assert waits_for_victims(scheduler)


def test_a_failed_borrowing_attempt_is_followed_by_one_without_borrowing() -> None:
    """Default order (borrowWithinCohort allowed): with borrowing, then without.
    b's borrower has a priority above maxPriorityThreshold, so it may only be
    reclaimed if p then does not borrow: the first attempt fails, the second
    takes it and a's own workload."""
    victims, scheduler = one_cycle(
        [
            cq(
                "a",
                "c",
                {GPU: 4},
                withinClusterQueue="LowerPriority",
                reclaimWithinCohort="LowerPriority",
                borrowWithinCohort={"policy": "LowerPriority", "maxPriorityThreshold": 0},
            ),
            cq("b", "c", {GPU: 4}),
        ],
        [
            running("a-own", "a", {GPU: 2}),
            running("b-borrower", "b", {GPU: 6}, priority=5),
            waiting("p", "a", {GPU: 4}),
        ],
    )
    assert victims == {"b-borrower": "InCohortReclamation", "a-own": "InClusterQueue"}
    assert waits_for_victims(scheduler)


def test_hierarchical_candidates_make_the_borrowing_attempt_run_first_even_when_forbidden() -> None:
    """borrowWithinCohort Never, but p's request fits its cohort x (x's own
    quota): b's borrower, found above x, is a hierarchical candidate, so the
    attempt with borrowing runs first and takes it alone. Without borrowing
    first, a's own workload would have gone too (p then fits a's nominal 4)."""
    victims, scheduler = one_cycle(
        [
            cq("a", "x", {GPU: 4}, **NEVER_BORROW),
            cq("s", "x", {GPU: 2}),
            cq("b", "r", {GPU: 0}),
        ],
        [
            running("a-own", "a", {GPU: 2}),
            running("s-borrower", "s", {GPU: 3}),  # borrows inside x: by priority only
            running("b-borrower", "b", {GPU: 4}),
            waiting("p", "a", {GPU: 4}),
        ],
        [cohort("r"), cohort("x", "r", gpu=3)],
    )
    # x: quota 9, used 5; p's 4 fit in x. The root (9) is full.
    assert victims == {"b-borrower": "InCohortReclamation"}
    assert waits_for_victims(scheduler)


# ------------------------------------------------------------ the hierarchy


def test_a_request_that_fits_the_queues_nominal_quota_reclaims_hierarchically() -> None:
    """QuantitiesFitInQuota at the queue itself: a's 4 free nominal GPUs hold
    p's request exactly (subtree >= usage + request, a having used none), so
    b's borrower is reclaimed with the hierarchical advantage: reason
    InCohortReclamation, although borrowWithinCohort would call a lower-priority
    borrower InCohortReclaimWhileBorrowing."""
    victims, scheduler = one_cycle(
        [
            cq(
                "a",
                "c",
                {GPU: 4},
                reclaimWithinCohort="LowerPriority",
                borrowWithinCohort={"policy": "LowerPriority"},
            ),
            cq("b", "c", {GPU: 0}),
        ],
        [running("b-borrower", "b", {GPU: 4}), waiting("p", "a", {GPU: 4})],
    )
    assert victims == {"b-borrower": "InCohortReclamation"}
    message = scheduler.status["default/b-borrower"].message
    assert "due to reclamation within the cohort; preemptor path: /c/a" in message


def test_what_the_queue_keeps_for_itself_is_deducted_before_asking_its_cohort() -> None:
    """The remaining request handed up is the request minus the node's local
    available quota (kept by its lendingLimit). a keeps 2 of its 4 GPUs and
    uses 1, so 3 of p's 4 are asked of x, which has 3 free of its 4: p has the
    hierarchical advantage over b's borrower above x (InCohortReclamation, not
    InCohortReclaimWhileBorrowing)."""
    victims, scheduler = one_cycle(
        [
            cq(
                "a",
                "x",
                {GPU: {"nominalQuota": 4, "lendingLimit": 2}},
                reclaimWithinCohort="LowerPriority",
                borrowWithinCohort={"policy": "LowerPriority"},
            ),
            cq("s", "x", {GPU: 2}),
            cq("b", "r", {GPU: 0}),
        ],
        [
            running("a-own", "a", {GPU: 1}, priority=20),
            running("s-own", "s", {GPU: 1}),
            running("b-borrower", "b", {GPU: 2}),
            waiting("p", "a", {GPU: 4}),
        ],
        [cohort("r"), cohort("x", "r")],
    )
    # a may take 1 kept + 1 free at the root = 2 < 4; b-borrower's 2 make it 4.
    assert victims == {"b-borrower": "InCohortReclamation"}
    assert waits_for_victims(scheduler)


def test_a_resource_held_in_the_queues_kept_quota_asks_nothing_of_its_cohort() -> None:
    """A request the node's kept quota covers leaves nothing (not at least one
    unit) to ask of the parent: p's 2 cpu fit in a's kept cpu, so x, whose cpu
    quota is 0 and fully used, still holds p's remaining request and p keeps the
    hierarchical advantage over b's borrower (InCohortReclamation)."""
    victims, scheduler = one_cycle(
        [
            cq(
                "a",
                "x",
                {
                    GPU: {"nominalQuota": 4, "lendingLimit": 2},
                    CPU: {"nominalQuota": 4, "lendingLimit": 0},
                },
                reclaimWithinCohort="LowerPriority",
                borrowWithinCohort={"policy": "LowerPriority"},
            ),
            cq("s", "x", {GPU: 2, CPU: 0}),
            cq("b", "r", {GPU: 0, CPU: 0}),
        ],
        [
            running("a-own", "a", {GPU: 1}, priority=20),
            running("s-own", "s", {GPU: 1}),
            running("b-borrower", "b", {GPU: 2}),
            waiting("p", "a", {GPU: 4, CPU: 2}),
        ],
        [cohort("r"), cohort("x", "r")],
    )
    assert victims == {"b-borrower": "InCohortReclamation"}
    assert waits_for_victims(scheduler)


def test_a_subtree_searched_at_one_level_is_skipped_at_the_next() -> None:
    """Each level above the first skips the subtree the previous level searched,
    so a workload is a candidate once. s (in x) borrows 6: its two workloads are
    candidates at x; at the root, x is skipped. p needs 6 with 2 free: both of
    s's workloads go (one would leave 5)."""
    victims, scheduler = one_cycle(
        [
            cq(
                "a",
                "x",
                {GPU: 2},
                reclaimWithinCohort="Any",
                borrowWithinCohort={"policy": "LowerPriority"},
            ),
            cq("s", "x", {GPU: 0}),
            cq("lender", "r", {GPU: 6}),
        ],
        [
            running("s-old", "s", {GPU: 3}, admitted=1),
            running("s-new", "s", {GPU: 3}, admitted=2),
            waiting("p", "a", {GPU: 6}),
        ],
        [cohort("r"), cohort("x", "r")],
    )
    assert victims == {
        "s-old": "InCohortReclaimWhileBorrowing",
        "s-new": "InCohortReclaimWhileBorrowing",
    }
    assert waits_for_victims(scheduler)


def test_a_workload_that_is_no_candidate_does_not_shield_the_rest_of_its_queue() -> None:
    """Every workload of a queue above its nominal quota is judged on its own:
    b's first workload has a higher priority than p (not a candidate under
    LowerPriority), its second is reclaimed."""
    victims, scheduler = one_cycle(
        [cq("a", "c", {GPU: 4}, reclaimWithinCohort="LowerPriority"), cq("b", "c", {GPU: 0})],
        [
            running("b-high", "b", {GPU: 2}, priority=20),
            running("b-low", "b", {GPU: 2}),
            waiting("p", "a", {GPU: 2}),
        ],
    )
    assert victims == {"b-low": "InCohortReclamation"}
    assert waits_for_victims(scheduler)


# ------------------------------------------------ steps both searches share


def test_a_one_unit_request_does_not_fit_where_nothing_is_available() -> None:
    """workloadFits: the request must not exceed what is available (a request
    of 1 against 0 does not fit). a may not borrow (borrowingLimit 0), so
    removing b's borrower frees nothing a may use; a's own workload must go, and
    b's borrower, tried first (other queues first), is given back."""
    victims, scheduler = one_cycle(
        [
            cq(
                "a",
                "c",
                {GPU: {"nominalQuota": 1, "borrowingLimit": 0}},
                withinClusterQueue="LowerPriority",
                reclaimWithinCohort="LowerPriority",
                borrowWithinCohort={"policy": "LowerPriority"},
            ),
            cq("b", "c", {GPU: 1}),
            cq("lender", "c", {GPU: 1}),
        ],
        [
            running("a-own", "a", {GPU: 1}),
            running("b-borrower", "b", {GPU: 2}),
            waiting("p", "a", {GPU: 1}),
        ],
    )
    assert victims == {"a-own": "InClusterQueue"}
    assert waits_for_victims(scheduler)


def test_a_workload_without_a_reservation_time_counts_as_reserved_now() -> None:
    """CandidatesOrdering's quotaReservationTime: a workload holding quota
    without a QuotaReserved time counts as reserved now, so among equal
    priorities it is the most recently admitted and goes first."""
    victims, _ = one_cycle(
        [cq("q", None, {GPU: 4}, withinClusterQueue="LowerPriority")],
        [
            running("reserved-at-5", "q", {GPU: 2}, admitted=5),
            running("no-time", "q", {GPU: 2}, admitted=None),
            waiting("p", "q", {GPU: 2}),
        ],
        cohorts=[],
        now=100,
    )
    assert victims == {"no-time": "InClusterQueue"}


def test_on_a_fair_sharing_tie_another_queues_candidate_goes_before_the_own_queues() -> None:
    """Fair sharing's target queue: between queues of equal share, the one whose
    first candidate comes first in CandidatesOrdering, where other queues' come
    before the preemptor's own. With p, a and b both borrow 2 of 8 (a in cpu, b
    in gpu); a is within nominal in the contested gpu, so the chosen target's
    workload goes without a share check: b's, by reclamation."""
    victims, scheduler = one_cycle(
        [
            cq("a", "c", {GPU: 2, CPU: 2}, **RECLAIM_ANY),
            cq("b", "c", {GPU: 2, CPU: 2}),
            cq("lender", "c", {GPU: 4, CPU: 4}),
        ],
        [
            running("a-own", "a", {GPU: 1, CPU: 3}),
            running("b-borrower", "b", {GPU: 4}),
            running("lender-own", "lender", {GPU: 3}),
            waiting("p", "a", {GPU: 1, CPU: 1}),
        ],
        fair_sharing=True,
    )
    assert victims == {"b-borrower": "InCohortReclamation"}
    assert waits_for_victims(scheduler)


def test_a_workload_admitted_earlier_in_the_cycle_is_never_a_victim() -> None:
    """Kueue adds the usage of a workload admitted earlier in the same cycle to
    the snapshot without making it one of the queue's workloads, so a search
    run later in the cycle never picks it. The search's ``exclude`` stands for
    those: the same search without it takes the workload."""
    scheduler = scheduler_of(
        [cq("q", None, {GPU: 4}, withinClusterQueue="LowerPriority")],
        [running("just-admitted", "q", {GPU: 4}), waiting("p", "q", {GPU: 4})],
        cohorts=[],
    )
    preemptor = scheduler.workloads["default/p"]
    queue = scheduler.policy.cluster_queues["q"]
    gpu: FlavorResource = ("default", GPU)
    anyone = scheduler.preemptor_for(set()).targets(preemptor, queue, {gpu}, {gpu: 4})
    assert [(t.workload.name, str(t.reason)) for t in anyone] == [
        ("just-admitted", "InClusterQueue")
    ]
    excluded = scheduler.preemptor_for({"default/just-admitted"})
    assert excluded.targets(preemptor, queue, {gpu}, {gpu: 4}) == []
