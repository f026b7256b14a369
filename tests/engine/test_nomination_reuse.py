"""A cycle reuses a head's last nomination while nothing in its cohort tree has
changed (``Scheduler._nomination``). Replays of any policy and any stream must
come out the same with the reuse as without it: same admissions at the same
times, same victims, same waits (hypothesis, no database)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.assign import Mode
from queues.engine.model import Policy, Workload
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator
from tests.engine.test_properties import draw_workloads, policies


@st.composite
def streams(draw: Any) -> tuple[Policy, list[Workload], float]:
    policy = draw(policies())
    workloads = draw_workloads(draw, policy, draw(st.integers(2, 14)), latest=40, timed=True)
    # With an eviction delay victims hold their quota while marked evicting.
    return policy, workloads, float(draw(st.sampled_from([0, 3])))


def simulator_for(policy: Policy, workloads: list[Workload], eviction: float) -> Simulator:
    """A replay of a drawn stream, on fresh copies of its workloads."""
    return Simulator(
        policy,
        [(w, "class") for w in copy.deepcopy(workloads)],
        eviction_delay=eviction,
        requeue_delay=1.0,
        # Some policies make workloads preempt each other for ever (the
        # simulator backs off but time goes on): the clock stops here.
        horizon=3_600.0,
    )


# How many reused answers each replay read again once their own queue's
# usage had moved (NominationMemory._read_again): the drawn replays must
# reach that path for their equality to say anything of it.
READ_AFTER_OWN_USAGE_MOVED: list[int] = []


def replay(
    policy: Policy, workloads: list[Workload], eviction: float, reuse: bool, check: bool = True
) -> Any:
    simulator = simulator_for(policy, workloads, eviction)
    simulator.scheduler.reuse_nominations = reuse
    # Every cycle run (asking afresh, none is told in place: test_unparking.py).
    simulator.park_in_place = False
    # Every reused answer, and what it read, is also asked afresh and must be
    # equal: figures no wording shows included. Unchecked, heads left standing
    # are told with their tree's block, unasked (StandingBlock).
    simulator.scheduler.check_reuse = reuse and check
    # What every cycle said of every head it left pending, word for word: a
    # reused answer must read as a fresh one would (its figures too).
    said: list[list[tuple[str, str, str]]] = []
    simulator.after_cycle = lambda cycle: said.append(
        sorted((key, p.reason, p.message) for key, p in cycle.evaluated.items())
    )
    result = simulator.run()
    if reuse:
        READ_AFTER_OWN_USAGE_MOVED.append(simulator.scheduler.read_after_own_usage_moved)
    records = {
        key: (r.first_admitted, r.finished, r.preemptions, r.preemptions_by_reason, r.lost_seconds)
        for key, r in result.records.items()
    }
    return records, result.admission_log, result.preemptions_by_reason, result.cycles, said


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_reusing_nominations_changes_no_replay(case: tuple[Policy, list[Workload], float]) -> None:
    policy, workloads, eviction = case
    fresh = replay(policy, workloads, eviction, reuse=False)
    assert replay(policy, workloads, eviction, reuse=True) == fresh
    assert replay(policy, workloads, eviction, reuse=True, check=False) == fresh


def test_the_drawn_replays_read_answers_again_after_their_own_usage_moved() -> None:
    if not READ_AFTER_OWN_USAGE_MOVED:
        test_reusing_nominations_changes_no_replay()
    replays = [count for count in READ_AFTER_OWN_USAGE_MOVED if count]
    assert len(replays) >= 50, READ_AFTER_OWN_USAGE_MOVED
    assert sum(replays) >= 300


GPU = "nvidia.com/gpu"


def _queue(name: str) -> dict[str, Any]:
    quota = {"name": GPU, "nominalQuota": 2, "borrowingLimit": 0}
    return {
        "name": name,
        "cohortName": "c",
        "queueingStrategy": "StrictFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [quota]}]}
        ],
    }


def _job(name: str, priority: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": "q",
        "priority": priority,
        "creationTime": 1,
        "podSets": [{"requests": {GPU: 2}}],
        **extra,
    }


def test_a_nomination_is_asked_again_when_its_own_queue_changed_though_its_figures_did_not() -> (
    None
):
    # A head whose queue is at its borrowing limit read only its own queue and
    # its quota checks. Its peer there ends and a workload it may preempt takes
    # the same GPUs: every figure it read is the same, but now it has a victim.
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [_queue("q"), _queue("other")],
            "workloads": [
                _job("peer", 5, admittedAt=0, admission={"main": {GPU: "h100"}}),
                _job("head", 5),
                _job("low", 0, admittedAt=2, admission={"main": {GPU: "h100"}}),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    scheduler = Scheduler(scenario.policy)
    scheduler.add(by_name["peer"])
    scheduler.add(by_name["head"])
    assert scheduler.cycle(now=1).evaluated["default/head"].reason == "WaitingForQuota"
    scheduler.finish("default/peer")
    scheduler.add(by_name["low"])
    result = scheduler.cycle(now=2)
    assert [(p.victim, p.reason) for p in result.preempted] == [("default/low", "InClusterQueue")]


def cohort_queue(
    name: str,
    nominal: int,
    cores: int | None = None,
    cohort: str = "c",
    borrowing_limit: int | None = None,
) -> dict[str, Any]:
    """A StrictFIFO queue of ``nominal`` h100 GPUs (and ``cores`` cores) in
    ``cohort``, borrowing GPUs up to ``borrowing_limit`` if given."""
    quotas: list[dict[str, Any]] = [{"name": GPU, "nominalQuota": nominal}]
    if borrowing_limit is not None:
        quotas[0]["borrowingLimit"] = borrowing_limit
    if cores is not None:
        quotas.append({"name": "cpu", "nominalQuota": cores})
    return {
        "name": name,
        "cohortName": cohort,
        "queueingStrategy": "StrictFIFO",
        "resourceGroups": [
            {
                "coveredResources": [q["name"] for q in quotas],
                "flavors": [{"name": "h100", "resources": quotas}],
            }
        ],
    }


def cohort_job(name: str, queue: str, gpus: int, at: int, cores: int = 0) -> dict[str, Any]:
    """Asking ``gpus`` GPUs, and ``cores`` cores if any (then no GPUs if none)."""
    requests: dict[str, int] = {GPU: gpus} if gpus or not cores else {}
    if cores:
        requests["cpu"] = cores
    return {
        "name": name,
        "clusterQueue": queue,
        "creationTime": at,
        "podSets": [{"requests": requests}],
    }


def asked_and_fresh(policy: Policy) -> tuple[Scheduler, Scheduler]:
    """A scheduler that reuses answers, each head asked (not told with its
    tree's block) so that check_reuse compares every reused answer with a
    fresh one, and one that asks every head afresh."""
    reusing, fresh = Scheduler(policy), Scheduler(policy)
    fresh.reuse_nominations = False
    reusing.standing_blocks = False
    reusing.check_reuse = True
    return reusing, fresh


def test_a_head_whose_room_changed_is_answered_again_with_the_new_figures() -> None:
    # "gang" asks 8 GPUs in a queue of 2 that may borrow from its cohort of
    # 10: "other" takes 4, then 5, so the room it reads goes 6, then 5; the
    # gang fits no better, searches no victims, and says what it misses. A
    # scheduler that nominates every head afresh says the same.
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 2), cohort_queue("other", 8)],
            "workloads": [
                cohort_job("first", "other", 4, 0),
                cohort_job("gang", "q", 8, 1),
                cohort_job("next", "other", 1, 2),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    reusing, fresh = Scheduler(scenario.policy), Scheduler(scenario.policy)
    fresh.reuse_nominations = False
    # Asked, not told with its tree's block: the block tells a head the new
    # figures without keeping them in its nomination, read below.
    reusing.standing_blocks = False
    said = []
    for scheduler in (reusing, fresh):
        scheduler.add(copy.deepcopy(by_name["first"]))
        scheduler.cycle(now=0)
        scheduler.add(copy.deepcopy(by_name["gang"]))
        scheduler.cycle(now=1)
        scheduler.add(copy.deepcopy(by_name["next"]))
        scheduler.cycle(now=2)  # admits "next" after the gang was nominated
        result = scheduler.cycle(now=3)
        # Kept with the figures read, worded in when the head is processed.
        entry = scheduler._worded(scheduler._nominations["default/gang"].entry)
        assert entry.assignment is not None
        (pod_set,) = entry.assignment.pod_sets
        said.append((result.evaluated["default/gang"], pod_set.reasons, pod_set.checks))
    assert reusing.refreshed == 1 and reusing.nominated == {"q": 1, "other": 2}
    assert said[0] == said[1]
    pending, reasons, checks = said[0]
    assert reasons == ["insufficient unused quota for nvidia.com/gpu in flavor h100, 3 more needed"]
    assert [c.available for c in checks] == [5]
    assert "3 more needed" in pending.message


def test_figures_read_in_turn_are_all_worded_into_the_answer() -> None:
    # The gang asks 8 GPUs and 40 cores where its cohort has 10 and 100.
    # "other" takes 4 GPUs; the gang is nominated (6 GPUs free: 2 short).
    # Then "more-gpus" takes one (5 free: 3 short) and "cores" 30 cores (70
    # free): each time only the figures it read change, and the second time
    # not the GPU one. Kept unworded in between (a head left standing), its
    # answer must still say 3 short, as a fresh nomination does.
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 2, cores=20), cohort_queue("other", 8, cores=80)],
            "workloads": [
                cohort_job("first", "other", 4, 0),
                cohort_job("gang", "q", 8, 1, cores=40),
                cohort_job("more-gpus", "other", 1, 2),
                cohort_job("cores", "other", 0, 3, cores=30),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    reusing, fresh = Scheduler(scenario.policy), Scheduler(scenario.policy)
    fresh.reuse_nominations = False
    said = []
    for scheduler in (reusing, fresh):
        told = []
        # A head the cycle processes (a watched cycle pops every head) has the
        # figures worded into its assignment, as whoever watches it reads it.
        processed: list[Any] = []

        def watch(entry: Any, process: Any, into: list[Any] = processed) -> None:
            into.append(entry.assignment)
            process()

        for at, name in enumerate(["first", "gang", "more-gpus", "cores"]):
            scheduler.add(copy.deepcopy(by_name[name]))
            scheduler.cycle(now=2 * at)
            if name == "cores":
                scheduler.process_watch = watch
            told.append(scheduler.cycle(now=2 * at + 1).evaluated.get("default/gang"))
        (assignment,) = processed
        (pod_set,) = assignment.pod_sets
        said.append((told, pod_set.reasons, pod_set.checks))
    assert reusing.refreshed == 2
    assert said[0] == said[1]
    told, reasons, checks = said[0]
    assert told[0] is None
    assert [p.message.split(", ")[-1] for p in told[1:]] == [
        "2 more needed",
        "3 more needed",
        "3 more needed",
    ]
    assert reasons == ["insufficient unused quota for nvidia.com/gpu in flavor h100, 3 more needed"]
    assert [(c.resource, c.available) for c in checks] == [(GPU, 5), ("cpu", 70_000)]


def test_a_head_below_a_cohort_that_stopped_borrowing_is_asked_again() -> None:
    # Cohort "team" (q: 2 GPUs, sib: 10) under root "org" with "far" (10).
    # The gang asks 8 GPUs in q. With sib holding 5 the team would borrow
    # from the root to hold it: it fits nowhere, no reclaiming can help
    # (the root has nothing above it). Then far takes 1 and sib gives 1
    # back: the gang still reads 7 free, but the team would now hold it
    # within its own quota, where reclaiming could help: the same figure at
    # another borrowing level, so its answer is asked again (its queue is
    # neither a root nor directly under one: its version does not cover that).
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "cohorts": [{"name": "org"}, {"name": "team", "parentName": "org"}],
            "clusterQueues": [
                cohort_queue("q", 2, cohort="team"),
                cohort_queue("sib", 10, cohort="team"),
                cohort_queue("far", 10, cohort="org"),
            ],
            "workloads": [
                cohort_job("s1", "sib", 4, 0),
                cohort_job("s2", "sib", 1, 0),
                cohort_job("f1", "far", 10, 0),
                cohort_job("gang", "q", 8, 1),
                cohort_job("f2", "far", 1, 2),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    reusing, fresh = Scheduler(scenario.policy), Scheduler(scenario.policy)
    fresh.reuse_nominations = False
    reusing.check_reuse = True  # a reused answer that read otherwise fails here
    modes = []
    for scheduler in (reusing, fresh):
        for name in ("s1", "s2", "f1"):
            scheduler.add(copy.deepcopy(by_name[name]))
        scheduler.cycle(now=0)
        scheduler.cycle(now=0)  # s2, behind s1 in its StrictFIFO queue
        scheduler.add(copy.deepcopy(by_name["gang"]))
        scheduler.cycle(now=1)
        scheduler.add(copy.deepcopy(by_name["f2"]))
        scheduler.cycle(now=2)
        scheduler.cycle(now=3)
        scheduler.finish("default/s2")
        scheduler.cycle(now=4)
        entry = scheduler._nominations["default/gang"].entry
        assert entry.assignment is not None
        modes.append([c.mode for c in entry.assignment.pod_sets[0].checks])
    assert reusing.nominated["q"] == 2  # asked again once the level moved
    assert modes[0] == modes[1] == [Mode.NO_CANDIDATES]


@pytest.mark.parametrize(
    ("mine", "read_again", "gpus_borrowed"),
    [(1, True, [0, 0]), (3, False, [1, 0])],
    ids=["levels-as-they-were", "gpus-no-longer-borrowed"],
)
def test_a_head_whose_own_queue_moved_is_read_again_with_its_levels(
    mine: int, read_again: bool, gpus_borrowed: list[int]
) -> None:
    # The gang asks 2 GPUs (q has 4) and 30 cores (q has 10, the cohort 15
    # free): no fit, and no victims to ask for. "mine", in q, ends: q's own
    # usage moved, and the gang's cores still fall short by as much. Holding
    # 1 GPU, it left the gang's GPUs within q's quota: read again, not
    # nominated afresh. Holding 3, it made them borrowed, and no longer once
    # ended: a borrowing level moved, so it is asked afresh. Either way its
    # answer is what asking afresh says.
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 4, cores=10), cohort_queue("other", 4, cores=100)],
            "workloads": [
                cohort_job("o1", "other", 0, 0, cores=95),
                cohort_job("mine", "q", mine, 0),
                cohort_job("gang", "q", 2, 1, cores=30),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    reusing, fresh = asked_and_fresh(scenario.policy)

    def checks_of(scheduler: Scheduler) -> list[tuple[str, int, Mode, int]]:
        entry = scheduler._worded(scheduler._nominations["default/gang"].entry)
        assert entry.assignment is not None
        checks = entry.assignment.pod_sets[0].checks
        return [(c.resource, c.available, c.mode, c.borrow) for c in checks]

    said = []
    for scheduler in (reusing, fresh):
        scheduler.add(copy.deepcopy(by_name["o1"]))
        scheduler.add(copy.deepcopy(by_name["mine"]))
        scheduler.cycle(now=0)
        scheduler.add(copy.deepcopy(by_name["gang"]))
        told = [scheduler.cycle(now=1).evaluated["default/gang"]]
        borrowed = [checks_of(scheduler)[0][3]]
        scheduler.finish("default/mine")
        told.append(scheduler.cycle(now=2).evaluated["default/gang"])
        borrowed.append(checks_of(scheduler)[0][3])
        assert borrowed == gpus_borrowed
        said.append((told, checks_of(scheduler)))
    assert said[0] == said[1]
    told, checks = said[0]
    assert [p.message.split(", ")[-1] for p in told] == ["15 more needed", "15 more needed"]
    assert checks == [(GPU, 8, Mode.FIT, 0), ("cpu", 15_000, Mode.NO_FIT, 0)]
    assert reusing.read_after_own_usage_moved == (1 if read_again else 0)
    assert reusing.nominated["q"] == (2 if read_again else 3)


def test_a_range_is_worked_out_again_once_its_queue_moved_though_its_room_did_not() -> None:
    # q (2 GPUs, borrowing up to 4 more) in a cohort of 16 runs "mine" (2):
    # its limit leaves it 4, the gang asks 5 and cannot fit, whatever the
    # cohort uses up to 12 (the range kept with the reading). "r2" takes 7
    # and "mine" ends: q's own usage moved, and the gang still reads 4, now
    # what the cohort has left, not what the limit leaves: the same room,
    # over no range. "r1" (5) ends next, leaving 6: the gang fits. Had the range
    # from before been kept, the cohort's 6 in use would fall in it and the
    # gang would be told it cannot fit, unasked.
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 2, borrowing_limit=4), cohort_queue("r", 14)],
            "workloads": [
                cohort_job("mine", "q", 2, 0),
                cohort_job("r1", "r", 5, 0),
                cohort_job("gang", "q", 5, 1),
                cohort_job("r2", "r", 7, 2),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    reusing, fresh = asked_and_fresh(scenario.policy)
    admitted = []
    for scheduler in (reusing, fresh):
        scheduler.add(copy.deepcopy(by_name["mine"]))
        scheduler.add(copy.deepcopy(by_name["r1"]))
        scheduler.cycle(now=0)
        scheduler.add(copy.deepcopy(by_name["gang"]))
        rooms = [scheduler.cycle(now=1).evaluated["default/gang"].message.split(", ")[-1]]
        scheduler.add(copy.deepcopy(by_name["r2"]))
        assert list(scheduler.cycle(now=2).admitted) == ["default/r2"]
        scheduler.finish("default/mine")
        rooms.append(scheduler.cycle(now=3).evaluated["default/gang"].message.split(", ")[-1])
        assert rooms == ["1 more needed", "1 more needed"]
        scheduler.finish("default/r1")
        admitted.append(list(scheduler.cycle(now=4).admitted))
    assert admitted == [["default/gang"], ["default/gang"]]
    assert reusing.read_after_own_usage_moved == 1
    assert reusing.nominated["q"] == 3  # mine, the gang, and the gang once it may fit
