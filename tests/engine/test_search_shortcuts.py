"""The classic victim search's two shortcuts, each turned off by a switch
(what it is checked against):

- it gives up when the preemptor would exceed its own queue's borrowing limit
  even with every candidate of its queue gone (``Preemptor._beyond_borrowing_limit``;
  ``Scheduler.stop_at_borrowing_limit``): no victim elsewhere can help it then;
- it does not walk its candidates when no walk could free enough
  (``Preemptor._could_fit``; ``Scheduler.stop_when_hopeless``): a bound on
  what each walk may take, removed at once, leaves the preemptor unfit.

Replays of any policy and stream come out exactly the same with each shortcut
as without it: admissions, victims, waits, cycles and usage figures
(hypothesis, no database). A gang that would borrow where its queue may not
preempt while borrowing shows the second one at work."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.model import FlavorResource, Policy, Workload
from queues.engine.preemption import hopeless_as_used
from queues.engine.result_codec import to_json
from queues.engine.runner import scheduler_for
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator
from queues.engine.victim_search import HopelessRead
from tests.engine.test_nomination_reuse import simulator_for, streams
from tests.engine.test_preemption_attempts_and_hierarchy import (
    RECLAIM_ANY,
    cq,
    running,
    scheduler_of,
    waiting,
)

# Searches the hopeless shortcut ended, over every drawn stream.
HOPELESS: list[int] = []


def replay(
    policy: Policy,
    workloads: list[Workload],
    eviction: float,
    *,
    at_limit: bool = True,
    hopeless: bool = True,
) -> dict[str, Any]:
    simulator = simulator_for(policy, workloads, eviction)
    simulator.scheduler.stop_at_borrowing_limit = at_limit
    simulator.scheduler.stop_when_hopeless = hopeless
    result = to_json(simulator.run())
    HOPELESS.append(simulator.scheduler.hopeless)
    return result


SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(streams())
def test_giving_up_at_the_borrowing_limit_changes_no_replay(
    case: tuple[Policy, list[Workload], float],
) -> None:
    policy, workloads, eviction = case
    shortcut = replay(policy, workloads, eviction, hopeless=False)
    searched = replay(policy, workloads, eviction, at_limit=False, hopeless=False)
    assert shortcut == searched


@SETTINGS
@given(streams())
def test_skipping_hopeless_walks_changes_no_replay(
    case: tuple[Policy, list[Workload], float],
) -> None:
    policy, workloads, eviction = case
    # Without the borrowing-limit shortcut too, so more searches reach the walk.
    skipped = replay(policy, workloads, eviction, at_limit=False)
    walked = replay(policy, workloads, eviction, at_limit=False, hopeless=False)
    assert skipped == walked


RESOURCES = ("nvidia.com/gpu", "cpu")


@st.composite
def searches(draw: Any) -> dict[str, Any]:
    """A cohort (maybe with a nested one) of 2-4 queues with drawn quotas,
    limits and preemption policies, workloads holding quota in them (over
    nominal or not), and a preemptor waiting in one of them."""
    nested = draw(st.booleans())
    cohorts: list[dict[str, Any]] = [{"name": "root"}]
    if nested:
        cohorts.append({"name": "inner", "parentName": "root"})
    queues = []
    for i in range(draw(st.integers(2, 4))):
        resources = []
        for resource in RESOURCES:
            quota: dict[str, Any] = {"name": resource, "nominalQuota": draw(st.integers(0, 6))}
            if draw(st.booleans()):
                quota["borrowingLimit"] = draw(st.integers(0, 6))
            if draw(st.integers(0, 3)) == 0:
                quota["lendingLimit"] = draw(st.integers(0, quota["nominalQuota"]))
            resources.append(quota)
        reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any"]))
        borrow: dict[str, Any] = {"policy": "Never"}
        if reclaim != "Never" and draw(st.booleans()):
            borrow["policy"] = "LowerPriority"  # Kueue refuses it beside reclaim Never
            if draw(st.booleans()):
                borrow["maxPriorityThreshold"] = draw(st.integers(0, 3))
        queues.append(
            {
                "name": f"q{i}",
                "cohortName": "inner" if nested and i % 2 else "root",
                "preemption": {
                    "withinClusterQueue": draw(
                        st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
                    ),
                    "reclaimWithinCohort": reclaim,
                    "borrowWithinCohort": borrow,
                },
                "resourceGroups": [
                    {
                        "coveredResources": list(RESOURCES),
                        "flavors": [{"name": "default", "resources": resources}],
                    }
                ],
            }
        )
    names = [q["name"] for q in queues]
    workloads = []
    for i in range(draw(st.integers(0, 9))):
        requests = {r: draw(st.integers(0, 4)) for r in RESOURCES}
        workloads.append(
            {
                "name": f"w{i}",
                "clusterQueue": draw(st.sampled_from(names)),
                "priority": draw(st.integers(0, 3)),
                "creationTime": 0,
                "admittedAt": draw(st.integers(0, 5)),
                "podSets": [{"requests": requests}],
                "admission": {"main": dict.fromkeys(requests, "default")},
            }
        )
    preemptor = {r: draw(st.integers(0, 8)) for r in RESOURCES}
    workloads.append(
        {
            "name": "p",
            "clusterQueue": draw(st.sampled_from(names)),
            "priority": draw(st.integers(0, 4)),
            "creationTime": 3,
            "podSets": [{"requests": preemptor}],
        }
    )
    return {
        "resourceFlavors": [{"name": "default"}],
        "cohorts": cohorts,
        "clusterQueues": queues,
        "workloads": workloads,
    }


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(searches())
def test_a_search_skipped_as_hopeless_finds_no_victims_when_walked(
    document: dict[str, Any],
) -> None:
    """Every contested set the preemptor could ask for: the search with the
    shortcut gives the victims the walk gives (none, when it skipped)."""
    scheduler = scheduler_for(parse(document))
    preemptor = scheduler.workloads["default/p"]
    queue = scheduler.policy.cluster_queues[preemptor.cluster_queue]
    requests: dict[FlavorResource, int] = {
        ("default", r): amount for r, amount in preemptor.pod_sets[0].requests.items() if amount
    }
    frs = sorted(requests)
    for mask in range(1, 2 ** len(frs)):
        contested = {fr for i, fr in enumerate(frs) if mask >> i & 1}
        found = []
        for hopeless in (True, False):
            search = scheduler.preemptor_for(set())
            search.stop_when_hopeless = hopeless
            targets = search.targets(preemptor, queue, contested, requests)
            found.append([(t.workload.key, t.reason) for t in targets])
            HOPELESS.append(search.hopeless)
        assert found[0] == found[1], (contested, found)


def test_the_drawn_cases_reach_the_hopeless_shortcut() -> None:
    """The properties above test something only if some drawn searches end
    there: run after them (pytest keeps the file's order)."""
    if not HOPELESS:
        test_a_search_skipped_as_hopeless_finds_no_victims_when_walked()
    assert sum(HOPELESS) > 0


GPU = "nvidia.com/gpu"


def _queue(name: str, nominal: int, strategy: str = "BestEffortFIFO") -> dict[str, Any]:
    return {
        "name": name,
        "cohortName": "division",
        "queueingStrategy": strategy,
        "preemption": {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never"},
        },
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "h100", "resources": [{"name": GPU, "nominalQuota": nominal}]}
                ],
            }
        ],
    }


def _gang_scenario(gang_at: float = 2) -> dict[str, Any]:
    """``training`` holds 8 of its 14 GPUs; ``research`` borrows 60 beyond its
    4; 2 of the cohort's 70 are free. A gang of 8 more would take ``training``
    past its nominal quota: it could only reclaim ``research``'s GPUs without
    borrowing, so no walk frees it room, at each of the many cycles in which
    ``research``'s short jobs start and end."""
    jobs: list[dict[str, Any]] = [
        {
            "name": "running",
            "clusterQueue": "training",
            "creationTime": 0,
            "runtime": 9_000,
            "podSets": [{"count": 1, "requests": {GPU: 8}}],
        },
        {
            "name": "borrowed",
            "clusterQueue": "research",
            "creationTime": 1,
            "runtime": 9_000,
            "podSets": [{"count": 1, "requests": {GPU: 60}}],
        },
        {
            "name": "gang",
            "clusterQueue": "training",
            "creationTime": gang_at,
            "runtime": 100,
            "podSets": [{"count": 1, "requests": {GPU: 8}}],
        },
    ]
    for i in range(20):
        jobs.append(
            {
                "name": f"short-{i}",
                "clusterQueue": "research",
                "creationTime": 10 + 50 * i,
                "runtime": 30,
                "podSets": [{"count": 1, "requests": {GPU: 1}}],
            }
        )
    return {
        "resourceFlavors": [{"name": "h100"}],
        "cohorts": [{"name": "division"}],
        "clusterQueues": [
            _queue("training", 14, "StrictFIFO"),
            _queue("research", 4),
            _queue("idle", 52),
        ],
        "workloads": jobs,
    }


def _replay_gang(
    hopeless: bool, reuse: bool = True, gang_at: float = 2
) -> tuple[dict[str, Any], Simulator]:
    scenario = parse(_gang_scenario(gang_at))
    simulator = Simulator(scenario.policy, [(w, "class") for w in scenario.workloads])
    simulator.scheduler.stop_when_hopeless = hopeless
    simulator.scheduler.reuse_nominations = reuse
    simulator.scheduler.check_reuse = reuse
    return to_json(simulator.run()), simulator


def test_a_gang_that_would_borrow_is_not_walked_for_victims_it_may_not_take() -> None:
    skipped, ended = _replay_gang(hopeless=True, reuse=False)
    walked, none = _replay_gang(hopeless=False, reuse=False)
    assert skipped == walked
    assert none.scheduler.hopeless == 0
    # Asked again at every start and end of a short job.
    assert ended.scheduler.hopeless >= 20


def test_a_gang_found_hopeless_is_only_asked_whether_it_still_is() -> None:
    # Each short job that starts or ends changes the gang's cohort, so its
    # answer cannot be reused as it stands; but its queue is unchanged, its
    # request fits no better, and each victim search it asked would end as
    # hopeless again: the answer is reused, with its figures read again
    # (check_reuse asks afresh each time and compares).
    reusing, simulator = _replay_gang(hopeless=True)
    fresh, _ = _replay_gang(hopeless=True, reuse=False)
    assert reusing == fresh
    scheduler = simulator.scheduler
    # "running"; the gang on arrival; the gang again once "running" ended
    # and its queue changed (43 before hopeless searches were re-asked).
    assert scheduler.nominated["training"] == 3
    assert scheduler.refreshed >= 20
    # Its cohort never used less than when it was found hopeless: known from
    # usage alone each time, its search not run again (hopeless_as_used).
    assert scheduler.hopeless_asked_again == scheduler.hopeless_as_used == 40


def test_a_hopeless_search_asked_again_is_held_to_the_usage_it_saw_then() -> None:
    # The gang arrives while "short-0" runs: found hopeless with the cohort
    # using 69 GPUs. When "short-0" ends (68) the search is run again, still
    # hopeless, and from then on held to 68: each later short ending (68
    # again) is known from usage alone. Held to 69, each would run again.
    reusing, simulator = _replay_gang(hopeless=True, gang_at=20)
    fresh, _ = _replay_gang(hopeless=True, reuse=False, gang_at=20)
    assert reusing == fresh
    scheduler = simulator.scheduler
    assert scheduler.hopeless_asked_again == 39
    assert scheduler.hopeless_as_used == 38


def _victims(
    queues: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    cohorts: list[dict[str, Any]],
    *,
    hopeless: bool,
) -> tuple[dict[str, str], int]:
    scheduler = scheduler_of(queues, workloads, cohorts)
    scheduler.stop_when_hopeless = hopeless
    result = scheduler.cycle()
    return {p.victim.removeprefix("default/"): str(p.reason) for p in result.preempted}, (
        scheduler.hopeless
    )


def test_victims_in_its_own_queue_can_stop_a_preemptor_borrowing() -> None:
    """p would borrow (2 held + 4 > 4), and the cohort is full. Without its
    own queue's w it would not, and reclaiming one of q1's jobs then frees the
    room: the walk that may not leave it borrowing takes both, so the
    shortcut must count w's GPUs before it says no walk can succeed."""
    queues = [
        cq("q0", "c", {GPU: 4}, **RECLAIM_ANY),
        cq("q1", "c", {GPU: 4}),
        cq("q2", "c", {GPU: 4}),
    ]
    workloads = [
        running("w", "q0", {GPU: 2}, priority=0),
        running("q1-a", "q1", {GPU: 5}, admitted=1),
        running("q1-b", "q1", {GPU: 5}, admitted=2),
        waiting("p", "q0", {GPU: 4}),
    ]
    cohorts = [{"name": "c"}]
    shortcut, _ = _victims(queues, workloads, cohorts, hopeless=True)
    walked, _ = _victims(queues, workloads, cohorts, hopeless=False)
    assert walked == {"w": "InClusterQueue", "q1-b": "InCohortReclamation"}
    assert shortcut == walked


def test_a_request_within_its_cohort_reclaims_hierarchically_while_borrowing() -> None:
    """p would borrow 2 from its cohort ``inner``, which has them; ``root`` is
    full with q1 borrowing ``inner``'s lent quota. The request fits ``inner``,
    so q1's job is a hierarchical candidate, taken even though p borrows: the
    shortcut may not count it as one that only reclaims without borrowing."""
    queues = [
        cq("q0", "inner", {GPU: 4}, **RECLAIM_ANY),
        cq("qi", "inner", {GPU: 4}),
        cq("q1", "root", {GPU: 0}),
    ]
    workloads = [
        running("own", "q0", {GPU: 4}, priority=10),
        running("far", "q1", {GPU: 4}),
        waiting("p", "q0", {GPU: 2}),
    ]
    cohorts = [{"name": "root"}, {"name": "inner", "parentName": "root"}]
    shortcut, _ = _victims(queues, workloads, cohorts, hopeless=True)
    walked, _ = _victims(queues, workloads, cohorts, hopeless=False)
    assert walked == {"far": "InCohortReclamation"}
    assert shortcut == walked


def _job(name: str, queue: str, gpus: int, priority: int, at: int, runtime: int) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": queue,
        "priority": priority,
        "creationTime": at,
        "runtime": runtime,
        "podSets": [{"count": 1, "requests": {GPU: gpus}}],
    }


def _hopeless_scene() -> dict[str, Any]:
    """A cohort of 10 GPUs: "training" holds its 4 ("peer" at the gang's
    priority, "low" below it), "research" 5 of its 6 ("brief" ends soon);
    the gang asks 4 in training."""
    return {
        "resourceFlavors": [{"name": "h100"}],
        "cohorts": [{"name": "division"}],
        "clusterQueues": [_queue("training", 4), _queue("research", 6)],
        "workloads": [
            _job("peer", "training", 2, 10, 0, 9_000),
            _job("low", "training", 2, 0, 0, 9_000),
            _job("steady", "research", 3, 0, 0, 9_000),
            _job("brief", "research", 2, 0, 0, 50),
            _job("gang", "training", 4, 10, 1, 100),
        ],
    }


def test_a_hopeless_answer_is_not_reused_once_the_cohort_would_let_a_victim_free_enough() -> None:
    # The cohort has 10 GPUs: "training" holds its 4 ("peer" at the gang's
    # priority, "low" below it), "research" 5 of its 6. The gang asks 4:
    # with "low" gone 3 would be free, so its search ends as hopeless at
    # once. When "brief" ends, 3 are free: the gang still does not fit, at the
    # same borrowing level, but with "low" gone 5 would be, and "low" is its
    # victim. Reusing the hopeless answer because the figures fit no better
    # would leave the gang waiting for "low" to finish.
    scenario = parse(_hopeless_scene())
    said = {}
    for reuse in (True, False):
        simulator = Simulator(
            scenario.policy, [(w, "c") for w in copy.deepcopy(scenario.workloads)]
        )
        simulator.scheduler.reuse_nominations = reuse
        result = simulator.run()
        said[reuse] = to_json(result)
        if reuse:
            assert simulator.scheduler.hopeless >= 1  # the gang's first search
            gang, low = result.records["default/gang"], result.records["default/low"]
            assert gang.first_admitted is not None and gang.first_admitted < 1_000
            assert low.preemptions == 1
    assert said[True] == said[False]


def _gang_found_hopeless(scene: dict[str, Any]) -> tuple[Scheduler, Workload, HopelessRead]:
    """``_hopeless_scene`` (or a variant) up to the gang's first cycle: its
    one hopeless read."""
    scenario = parse(scene)
    by_name = {w.name: w for w in scenario.workloads}
    scheduler = Scheduler(scenario.policy)
    for name in ("peer", "low", "steady", "brief"):
        scheduler.add(by_name[name])
        scheduler.cycle(now=0)
    gang = by_name["gang"]
    scheduler.add(gang)
    scheduler.cycle(now=1)
    witness = scheduler._nominations[gang.key].witness
    assert witness is not None
    (read,) = witness[2]
    return scheduler, gang, read


def test_a_hopeless_search_asked_again_keeps_its_own_queues_candidates_while_they_hold() -> None:
    # The scene above, as "brief" ends: the gang's search, asked again, finds
    # victims possible with "low" gone ("low" is its own queue's candidate).
    # Its read kept the candidates found then; they stand for the queue's
    # while the preemptor's queue order time is the one read (its queue is
    # unchanged whenever the read is asked again): here a read kept with none
    # says "still hopeless". Once the time moved, they are gathered again.
    scheduler, gang, (contested, usage, same, ordered_at, along) = _gang_found_hopeless(
        _hopeless_scene()
    )
    assert [c.workload.name for c in same] == ["low"] and ordered_at == gang.queue_order_time
    scheduler.finish("default/brief")
    queue = scheduler.policy.cluster_queues["training"]
    preemptor = scheduler.preemptor_for(set())
    assert not preemptor.still_without_victims(
        gang, queue, (contested, usage, same, ordered_at, along)
    )
    assert preemptor.still_without_victims(gang, queue, (contested, usage, [], ordered_at, along))
    moved = ordered_at - 1
    assert not preemptor.still_without_victims(gang, queue, (contested, usage, [], moved, along))


def test_a_hopeless_search_is_known_from_usage_only_where_nothing_can_free_more() -> None:
    # Found hopeless with "low" its own queue's candidate; known to hold
    # again without running it while no level uses less, the gang's queue
    # order time as read, and the queue's cohort a root.
    scheduler, gang, read = _gang_found_hopeless(_hopeless_scene())
    node = scheduler.tree.queues["training"]
    assert hopeless_as_used(node, gang, read)
    moved = (read[0], read[1], read[2], read[3] - 1, read[4])
    assert not hopeless_as_used(node, gang, moved)
    scheduler.finish("default/brief")  # the cohort uses less: asked again
    assert not hopeless_as_used(node, gang, read)
    # Under a cohort under another, taking its own candidates out of the
    # tree frees the upper cohort as the middle one holds: asked again.
    nested = _hopeless_scene()
    nested["cohorts"] = [{"name": "org"}, {"name": "division", "parentName": "org"}]
    scheduler, gang, read = _gang_found_hopeless(nested)
    node = scheduler.tree.queues["training"]
    assert node.parent is not None and node.parent.parent is not None
    assert read[2] and not hopeless_as_used(node, gang, read)
    assert hopeless_as_used(node, gang, (read[0], read[1], [], read[3], read[4]))


def test_the_priorities_held_per_queue_follow_every_hold_and_release() -> None:
    # The victim search within a queue that may take only lower priorities
    # reads them (Preemptor._none_lower) instead of the queue's workloads:
    # after every cycle of a replay with preemptions within a queue and in
    # its cohort, they are those of the workloads holding quota there.
    scenario = parse(_hopeless_scene())
    simulator = Simulator(scenario.policy, [(w, "c") for w in scenario.workloads])
    scheduler = simulator.scheduler
    checked: list[int] = []

    def compare(_: object) -> None:
        for name, held in scheduler.reserved.items():
            counts: dict[int, int] = {}
            for workload in held.values():
                counts[workload.priority] = counts.get(workload.priority, 0) + 1
            assert scheduler.reserved_priorities[name] == counts, name
        checked.append(len(checked))

    simulator.after_cycle = compare
    result = simulator.run()
    assert result.records["default/low"].preemptions == 1
    assert len(checked) > 5
    preemptor = scheduler.preemptor_for(set())
    assert preemptor.reserved_priorities is scheduler.reserved_priorities


def _preempting(needed: int, *, own: bool) -> tuple[dict[str, str], int, dict[str, str]]:
    """Eight 1-GPU jobs hold q0's 8 GPUs: q0's own, at a lower priority than
    p (``own``), or q1's, borrowed. p, in q0, asks for ``needed`` of them.
    The victims of one search (the preemptor's, and its count of walks that
    succeeded within their first steps), and those of the whole cycle with
    the hopeless shortcut off."""
    queues = [
        cq("q0", "c", {GPU: 8}, **RECLAIM_ANY),
        cq("q1", "c", {GPU: 0}),
    ]
    holder = "q0" if own else "q1"
    workloads = [
        *(running(f"j{i}", holder, {GPU: 1}, admitted=i) for i in range(1, 9)),
        waiting("p", "q0", {GPU: needed}),
    ]
    scheduler = scheduler_of(queues, workloads, [{"name": "c"}])
    preemptor = scheduler.preemptor_for(set())
    p = scheduler.workloads["default/p"]
    queue = scheduler.policy.cluster_queues["q0"]
    fr: FlavorResource = ("default", GPU)
    targets = preemptor.targets(p, queue, {fr}, {fr: needed})
    searched = {t.workload.name: str(t.reason) for t in targets}
    walked, _ = _victims(queues, workloads, [{"name": "c"}], hopeless=False)
    return searched, preemptor.found_in_first_steps, walked


@pytest.mark.parametrize(
    ("needed", "within_first_steps"),
    # Three victims end the walk within its first steps; six take it past them.
    [(3, 1), (6, 0)],
)
@pytest.mark.parametrize(
    ("own", "reason"), [(False, "InCohortReclamation"), (True, "InClusterQueue")]
)
def test_a_walk_finds_the_whole_walks_victims_within_or_past_its_first_steps(
    needed: int, within_first_steps: int, own: bool, reason: str
) -> None:
    searched, early, walked = _preempting(needed, own=own)
    # The most recently admitted go first: j8, j7, ...
    assert searched == {f"j{i}": reason for i in range(8, 8 - needed, -1)}
    assert early == within_first_steps
    assert walked == searched
