"""A classic victim search's first steps read in order from the newest held
(``queues.engine.first_candidates``), against gathering and sorting every
candidate (``Scheduler.first_held_in_order`` off):

- per search, the first steps and what the attempts ask of the candidate lists
  are those of the full sort, for drawn cohorts held in admission order or
  not, at one priority per queue or more, some of them being evicted;
- replays of any policy and stream come out exactly the same either way;
- the order each queue's holds are in, and those being evicted, follow every
  hold, release and eviction of a replay.

Hypothesis, no database."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.first_candidates import FIRST_STEPS
from queues.engine.model import FlavorResource, Policy, Workload
from queues.engine.result_codec import to_json
from queues.engine.runner import scheduler_for
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator
from tests.engine.test_nomination_reuse import simulator_for, streams
from tests.engine.test_preemption_attempts_and_hierarchy import (
    RECLAIM_ANY,
    cq,
    running,
    scheduler_of,
    waiting,
)

GPU = "nvidia.com/gpu"
RESOURCES = (GPU, "cpu")

# Searches read in order, and of those found within their first steps, over
# every drawn case: the properties test something only if some are.
READ_IN_ORDER: list[int] = []
FOUND_IN_ORDER: list[int] = []


@st.composite
def held_cohorts(draw: Any) -> dict[str, Any]:
    """A cohort (maybe with a nested one) of 2-5 queues, with workloads
    holding quota there, added in the order of their admission times (with
    ties) unless drawn otherwise, at one priority per queue unless drawn
    otherwise; some marked as being evicted; and a preemptor in one queue."""
    nested = draw(st.booleans())
    cohorts: list[dict[str, Any]] = [{"name": "root"}]
    if nested:
        cohorts.append({"name": "inner", "parentName": "root"})
    queues = []
    for i in range(draw(st.integers(2, 5))):
        reclaim = draw(st.sampled_from(["LowerPriority", "Any", "Never"]))
        borrow: dict[str, Any] = {"policy": "Never"}
        if reclaim != "Never" and draw(st.booleans()):
            borrow["policy"] = "LowerPriority"
            if draw(st.booleans()):
                borrow["maxPriorityThreshold"] = draw(st.integers(0, 3))
        quotas = {r: draw(st.integers(0, 5)) for r in RESOURCES}
        queues.append(
            cq(
                f"q{i}",
                "inner" if nested and i % 2 else "root",
                quotas,
                withinClusterQueue=draw(
                    st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
                ),
                reclaimWithinCohort=reclaim,
                borrowWithinCohort=borrow,
            )
        )
    names = [q["name"] for q in queues]
    one_priority = {name: draw(st.integers(0, 3)) for name in names}
    mixed = draw(st.booleans())
    count = draw(st.integers(0, 14))
    times = sorted(draw(st.lists(st.integers(0, 6), min_size=count, max_size=count)))
    if draw(st.integers(0, 4)) == 0:
        times = draw(st.permutations(times))  # not in admission order
    workloads = []
    for i, at in enumerate(times):
        queue = draw(st.sampled_from(names))
        priority = draw(st.integers(0, 3)) if mixed else one_priority[queue]
        requests = {r: draw(st.integers(0, 3)) for r in RESOURCES}
        # Keys out of admission order, so ties are broken by key, not by place.
        workloads.append(
            running(
                f"w{draw(st.integers(0, 99)):02d}-{i}",
                queue,
                requests,
                priority=priority,
                admitted=at,
            )
        )
    preemptor = waiting(
        "p",
        draw(st.sampled_from(names)),
        {r: draw(st.integers(1, 6)) for r in RESOURCES},
        priority=draw(st.integers(0, 4)),
    )
    evicting = draw(st.lists(st.integers(0, max(0, count - 1)), max_size=6)) if count else []
    return {
        "resourceFlavors": [{"name": "default"}],
        "cohorts": cohorts,
        "clusterQueues": queues,
        "workloads": [*workloads, preemptor],
        "evicting": sorted(set(evicting)),
    }


def _scheduler(document: dict[str, Any], *, in_order: bool = True) -> Scheduler:
    scene = {key: value for key, value in document.items() if key != "evicting"}
    scheduler = scheduler_for(parse(scene))
    scheduler.first_held_in_order = in_order
    held = [w for w in scheduler.workloads.values() if w.admission is not None]
    for index in document["evicting"]:
        # As Scheduler._preempt marks a victim whose job is stopping.
        victim = held[index]
        victim.evicting = True
        scheduler.evicting_held[victim.cluster_queue][victim.key] = victim
        scheduler.changed_tree(victim.cluster_queue)
    return scheduler


def _contested_sets(
    preemptor: Workload,
) -> list[tuple[set[FlavorResource], dict[FlavorResource, int]]]:
    requests: dict[FlavorResource, int] = {
        ("default", r): amount for r, amount in preemptor.pod_sets[0].requests.items() if amount
    }
    frs = sorted(requests)
    return [
        ({fr for i, fr in enumerate(frs) if mask >> i & 1}, requests)
        for mask in range(1, 2 ** len(frs))
    ]


SEARCHES = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_as_sorted(scheduler: Scheduler) -> int:
    """For every contested set of p's requests, the first steps read in order
    are the full sort's, with what the attempts ask of the lists; how many
    searches were read so."""
    preemptor = scheduler.workloads["default/p"]
    queue = scheduler.policy.cluster_queues[preemptor.cluster_queue]
    node = scheduler.tree.queues[queue.name]
    read = 0
    for contested, usage in _contested_sets(preemptor):
        search = scheduler.preemptor_for(set())
        same = search._same_queue_candidates(preemptor, queue, contested)
        sources = search._cohort_sources(node, usage, contested) if node.parent else []
        first = search.first_in_order(preemptor, queue, sources, same, contested)
        if first is None:
            continue
        read += 1
        prefix, has_hierarchy, has_by_priority = first
        hierarchy, by_priority = search._gathered(preemptor, queue, sources, contested)
        ordered = search._ordered([hierarchy, by_priority, same])
        assert [(c.workload.key, c.variant, c.queue.name) for c in prefix] == [
            (c.workload.key, c.variant, c.queue.name) for c in ordered[:FIRST_STEPS]
        ]
        # What the attempts ask: whether any reclaims hierarchically, and, if
        # none does, whether any reclaims by priority.
        assert has_hierarchy == bool(hierarchy)
        if not has_hierarchy:
            assert has_by_priority == bool(by_priority)
    return read


@SEARCHES
@given(held_cohorts())
def test_the_first_steps_read_in_order_are_those_of_the_full_sort(document: dict[str, Any]) -> None:
    READ_IN_ORDER.append(_read_as_sorted(_scheduler(document)))


def test_the_attempts_know_a_list_has_candidates_when_the_evicting_fill_the_steps() -> None:
    # p's 3 GPUs fit below the inner cohort (q2 lends it 4), not in q0's
    # own 2: qi's candidates (inner) reclaim by priority, qr's (root)
    # hierarchically. qi's four being evicted fill the first steps; qr's one
    # is still a candidate, which the attempts ask about.
    queues = [
        cq("q0", "inner", {GPU: {"nominalQuota": 2, "lendingLimit": 0}}, **RECLAIM_ANY),
        cq("qi", "inner", {GPU: 4}),
        cq("q2", "inner", {GPU: 4}),
        cq("qr", "root", {GPU: 0}),
    ]
    workloads = [
        *(running(f"i{n}", "qi", {GPU: 1}, admitted=n) for n in range(1, 6)),
        running("r1", "qr", {GPU: 1}, admitted=1),
        waiting("p", "q0", {GPU: 3}),
    ]
    document = {
        "resourceFlavors": [{"name": "default"}],
        "cohorts": [{"name": "root"}, {"name": "inner", "parentName": "root"}],
        "clusterQueues": queues,
        "workloads": workloads,
        "evicting": [1, 2, 3, 4],
    }
    assert _read_as_sorted(_scheduler(document)) == 1


@SEARCHES
@given(held_cohorts())
def test_a_search_read_in_order_finds_the_victims_the_full_sort_finds(
    document: dict[str, Any],
) -> None:
    found = []
    for in_order in (True, False):
        scheduler = _scheduler(document, in_order=in_order)
        preemptor = scheduler.workloads["default/p"]
        queue = scheduler.policy.cluster_queues[preemptor.cluster_queue]
        victims = []
        for contested, usage in _contested_sets(preemptor):
            search = scheduler.preemptor_for(set())
            targets = search.targets(preemptor, queue, contested, usage)
            victims.append([(t.workload.key, t.reason) for t in targets])
            if in_order:
                FOUND_IN_ORDER.append(search.found_in_order)
            else:
                assert search.found_in_order == 0
        found.append(victims)
    assert found[0] == found[1]


REPLAYS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _replay(
    policy: Policy, workloads: list[Workload], eviction: float, *, in_order: bool
) -> dict[str, Any]:
    simulator = simulator_for(policy, workloads, eviction)
    simulator.scheduler.first_held_in_order = in_order
    result = to_json(simulator.run())
    if in_order:
        FOUND_IN_ORDER.append(simulator.scheduler.found_in_order)
    return result


@REPLAYS
@given(streams())
def test_reading_first_steps_in_order_changes_no_replay(
    case: tuple[Policy, list[Workload], float],
) -> None:
    policy, workloads, eviction = case
    read = _replay(policy, workloads, eviction, in_order=True)
    sorted_ = _replay(policy, workloads, eviction, in_order=False)
    assert read == sorted_


def test_the_drawn_cases_are_read_in_order_and_find_victims_so() -> None:
    """Run after the properties above (pytest keeps the file's order)."""
    if not READ_IN_ORDER:
        test_the_first_steps_read_in_order_are_those_of_the_full_sort()
    if not FOUND_IN_ORDER:
        test_a_search_read_in_order_finds_the_victims_the_full_sort_finds()
    assert len(READ_IN_ORDER) > 100
    assert sum(FOUND_IN_ORDER) > 100


def test_the_newest_held_across_queues_go_first_ties_by_key() -> None:
    # q1 and q2 borrow q0's quota: their workloads are reclaimed newest
    # first across both queues, q1-a before q2-b (by key) where both came at
    # t=5, and neither q2-mid nor q1-old is needed.
    queues = [
        cq("q0", "c", {GPU: 6}, **RECLAIM_ANY),
        cq("q1", "c", {GPU: 0}),
        cq("q2", "c", {GPU: 0}),
    ]
    workloads = [
        running("q1-old", "q1", {GPU: 2}, admitted=1),
        running("q2-mid", "q2", {GPU: 1}, admitted=3),
        running("q2-b", "q2", {GPU: 1}, admitted=5),
        running("q1-a", "q1", {GPU: 1}, admitted=5),
        running("q1-new", "q1", {GPU: 1}, admitted=6),
        waiting("p", "q0", {GPU: 3}),
    ]
    found = _victims_read_both_ways(queues, workloads, 3)
    assert found == [(["q1-a", "q1-new", "q2-b"], 1), (["q1-a", "q1-new", "q2-b"], 0)]


def _victims_read_both_ways(
    queues: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    gpus: int,
    marked: str | None = None,
) -> list[tuple[list[str], int]]:
    """p's victims in q0, and how many searches found them in first steps
    read in order, read in order and sorted; ``marked`` set evicting
    without the scheduler."""
    found = []
    for in_order in (True, False):
        scheduler = scheduler_of(queues, workloads)
        scheduler.first_held_in_order = in_order
        if marked is not None:
            scheduler.workloads[f"default/{marked}"].evicting = True
        search = scheduler.preemptor_for(set())
        p = scheduler.workloads["default/p"]
        fr: FlavorResource = ("default", GPU)
        targets = search.targets(p, scheduler.policy.cluster_queues["q0"], {fr}, {fr: gpus})
        found.append((sorted(t.workload.name for t in targets), search.found_in_order))
    return found


def test_a_queue_whose_newest_ties_with_the_first_steps_is_read_for_smaller_keys() -> None:
    # qa's four came at t=5, as did both of qb's: qb's newest (z9) ranks
    # after qa's, but b1, held before it, ranks first of all.
    queues = [
        cq("q0", "c", {GPU: 6}, **RECLAIM_ANY),
        cq("qa", "c", {GPU: 0}),
        cq("qb", "c", {GPU: 0}),
    ]
    workloads = [
        *(running(f"m{i}", "qa", {GPU: 1}, admitted=5) for i in range(1, 5)),
        running("b1", "qb", {GPU: 1}, admitted=5),
        running("z9", "qb", {GPU: 1}, admitted=5),
        waiting("p", "q0", {GPU: 4}),
    ]
    found = _victims_read_both_ways(queues, workloads, 4)
    assert found == [(["b1", "m1", "m2", "m3"], 1), (["b1", "m1", "m2", "m3"], 0)]


def test_a_holder_marked_evicting_behind_the_schedulers_back_is_read_by_the_full_sort() -> None:
    # m3 marked as being evicted where evicting_held did not see it: it goes
    # first, before the newer m4, and reading in order gives way to the sort.
    queues = [cq("q0", "c", {GPU: 4}, **RECLAIM_ANY), cq("qa", "c", {GPU: 0})]
    workloads = [
        *(running(f"m{i}", "qa", {GPU: 1}, admitted=i) for i in range(1, 5)),
        waiting("p", "q0", {GPU: 1}),
    ]
    found = _victims_read_both_ways(queues, workloads, 1, marked="m3")
    assert found == [(["m3"], 0), (["m3"], 0)]


def test_what_a_queue_holds_in_order_and_evicting_follows_every_hold_and_release() -> None:
    # After every cycle of replays with victims held while being evicted: a
    # queue said to be held in order holds stamped workloads in the order of
    # their admission times, and those being evicted are those marked so.
    checked: list[bool] = []
    for eviction in (0.0, 3.0):
        policy, workloads, _ = _reclaiming_stream()
        simulator = simulator_for(policy, workloads, eviction)
        scheduler = simulator.scheduler

        def compare(_: object, scheduler: Scheduler = scheduler) -> None:
            for name, held in scheduler.reserved.items():
                marked = {key: w for key, w in held.items() if w.evicting}
                assert scheduler.evicting_held[name] == marked, name
                if scheduler.held_in_order[name]:
                    times = [w.admitted_at for w in held.values()]
                    assert None not in times
                    assert times == sorted(times), name  # type: ignore[type-var]
                checked.append(bool(marked))

        simulator.after_cycle = compare
        simulator.run()
    assert len(checked) > 20
    assert any(checked)  # some cycles ended with victims still being evicted


def _reclaiming_stream() -> tuple[Policy, list[Workload], float]:
    """q1 borrows all of q0's GPUs; q0's own work then reclaims them, one
    job at a time, from the newest."""
    scene = parse(
        {
            "resourceFlavors": [{"name": "default"}],
            "cohorts": [{"name": "c"}],
            "clusterQueues": [
                cq("q0", "c", {GPU: 8}, **RECLAIM_ANY),
                cq("q1", "c", {GPU: 0}),
            ],
            "workloads": [
                *(
                    {
                        **waiting(f"b{i}", "q1", {GPU: 1}, priority=0),
                        "creationTime": i,
                        "runtime": 100,
                    }
                    for i in range(8)
                ),
                *(
                    {**waiting(f"r{i}", "q0", {GPU: 2}), "creationTime": 20 + i, "runtime": 30}
                    for i in range(3)
                ),
            ],
        }
    )
    return scene.policy, [copy.deepcopy(w) for w in scene.workloads], 0.0


def test_a_replay_of_the_stream_above_reads_its_victims_in_order() -> None:
    policy, workloads, _ = _reclaiming_stream()
    simulator = Simulator(policy, [(w, "c") for w in workloads], eviction_delay=3.0)
    result = simulator.run()
    assert simulator.scheduler.found_in_order >= 3
    assert sum(r.preemptions for r in result.records.values()) == 6
