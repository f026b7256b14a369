"""Parked work told again where it is, when queueing it again would only park
it again (``queues.engine.unparking``): a replay must be the same as one whose
every unparking queues the parked work again and cycles it, word for word."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.model import Policy, Workload
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator
from tests.engine.test_nomination_reuse import cohort_job, cohort_queue, simulator_for
from tests.engine.test_properties import draw_workloads, policies

# How many unparkings each drawn replay told in place, and how many of its
# groups' last cycles it counted unasked (Settler.confirm_unasked, on with
# it): the replays must reach those paths for their equality to say anything
# of them.
IN_PLACE: list[int] = []
CONFIRMED: list[int] = []


@st.composite
def busy_streams(draw: Any) -> tuple[Policy, list[Workload], float]:
    """Drawn policies without fair sharing (whose cycles are never skipped),
    under enough work for queues to park and unpark again and again."""
    policy = dataclasses.replace(draw(policies()), fair_sharing=False)
    workloads = draw_workloads(draw, policy, draw(st.integers(8, 30)), latest=30, timed=True)
    return policy, workloads, float(draw(st.sampled_from([0, 3])))


def replay(simulator: Simulator, in_place: bool) -> Any:
    """The replay's figures, every workload's record, the cycles by kind, and
    what every workload was told as each event time began, and at the end."""
    simulator.park_in_place = in_place
    scheduler, settler = simulator.scheduler, simulator.settler
    told: list[tuple[float, list[tuple[str, str, str]]]] = []

    def before_event(now: float, kind: str, payload: Any) -> None:
        status = sorted((key, p.reason, p.message) for key, p in scheduler.status.items())
        if not told or told[-1] != (now, status):
            told.append((now, status))

    simulator.before_event = before_event
    result = simulator.run()
    before_event(simulator.now, "end", None)  # what the last event time told
    if in_place:
        IN_PLACE.append(settler.unparked_in_place)
        CONFIRMED.append(settler.confirmed_unasked)
    else:
        assert settler.unparked_in_place == settler.confirmed_unasked == 0
    records = {
        key: (r.first_admitted, r.finished, r.preemptions, r.lost_seconds)
        for key, r in result.records.items()
    }
    cycles = (settler.changing_cycles, settler.telling_cycles, settler.confirming_cycles)
    parked = {name: sorted(queue.parked) for name, queue in scheduler.queues.items()}
    return (
        records,
        result.admission_log,
        result.preemptions_by_reason,
        result.cycles,
        cycles,
        settler.livelocks,
        parked,
        told,
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(busy_streams())
def test_telling_parked_heads_in_place_changes_no_replay(
    case: tuple[Policy, list[Workload], float],
) -> None:
    policy, workloads, eviction = case
    cycled = replay(simulator_for(policy, workloads, eviction), in_place=False)
    assert replay(simulator_for(policy, workloads, eviction), in_place=True) == cycled


def test_the_drawn_replays_tell_parked_heads_in_place() -> None:
    if not IN_PLACE:
        test_telling_parked_heads_in_place_changes_no_replay()
    replays = [count for count in IN_PLACE if count]
    assert len(replays) >= 100, IN_PLACE
    assert sum(replays) >= 300
    confirmed = [count for count in CONFIRMED if count]
    assert len(confirmed) >= 100, CONFIRMED
    assert sum(confirmed) >= 600


def _gpus(name: str, nominal: int, strategy: str = "StrictFIFO") -> dict[str, Any]:
    queue = cohort_queue(name, nominal)
    queue["queueingStrategy"] = strategy
    return queue


def _job(name: str, queue: str, gpus: int, at: int, priority: int = 0, runtime: int = 9_000):
    return {**cohort_job(name, queue, gpus, at), "priority": priority, "runtime": runtime}


def _held_back(with_b1: bool, backing_off: bool = False) -> Simulator:
    """A cohort of 10 GPUs: "a" (6) runs a1 (6, priority 10) and waits with
    a2 (6, priority 5), which finds no victims and holds what it waits for
    in every cycle; "d" (1) runs d1 until 10; "b" (none of its own,
    BestEffortFIFO) parks b2 (5: 3 free, then 4 once d1 ends). With b1 (1
    GPU), b also has a head that fits when asked and no longer once a2 has
    held its GPUs, in every cycle: queued again at once, never parked. With
    ``backing_off``, "late" (2 GPUs of "r", kept to itself) is not to be
    queued before 11, when b2's unparking is due."""
    workloads = [
        _job("a1", "a", 6, 0, priority=10),
        _job("d1", "d", 1, 0, runtime=10),
        _job("a2", "a", 6, 1, priority=5),
        _job("b2", "b", 5, 2),
    ]
    if with_b1:
        workloads.append(_job("b1", "b", 1, 3))
    if backing_off:
        workloads.append(_job("late", "r", 2, 0))
    kept = _gpus("r", 2)
    kept["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 0
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [
                _gpus("a", 6),
                _gpus("b", 0, "BestEffortFIFO"),
                _gpus("c", 3),
                _gpus("d", 1),
                kept,
            ],
            "workloads": workloads,
        }
    )
    for workload in scenario.workloads:
        if workload.name == "late":
            workload.requeue_at = 11.0  # as a cluster's requeueState says
    return Simulator(scenario.policy, [(w, "class") for w in scenario.workloads], horizon=100.0)


def test_a_parked_head_still_short_is_told_where_it_is() -> None:
    # d1 ends at 10: b2 is asked again at 11, and still short (4 of 5).
    cycled = replay(_held_back(with_b1=False), in_place=False)
    simulator = _held_back(with_b1=False)
    assert replay(simulator, in_place=True) == cycled
    assert simulator.settler.unparked_in_place == 1
    told = [(now, dict((key, message) for key, _, message in said)) for now, said in cycled[-1]]
    assert told[-2][0] == 11.0 and told[-2][1]["default/b2"].endswith("2 more needed")
    assert told[-1][0] == 11.0 and told[-1][1]["default/b2"].endswith("1 more needed")
    assert cycled[-2] == {"a": [], "b": ["default/b2"], "c": [], "d": [], "r": []}


def test_work_backing_off_until_an_unparking_is_queued_with_it() -> None:
    # "late"'s requeue event and b2's unparking come at 11: the cycles queue
    # late at their start, and only they do.
    cycled = replay(_held_back(with_b1=False, backing_off=True), in_place=False)
    simulator = _held_back(with_b1=False, backing_off=True)
    assert replay(simulator, in_place=True) == cycled
    assert simulator.settler.unparked_in_place == 0
    assert cycled[0]["default/late"][0] == 11.0


def test_a_queue_with_a_head_queued_again_at_once_is_cycled() -> None:
    # b1 is queued in b beside b2's parked shape: unparked, b2 comes first
    # and b1 only in the next cycle; telling b2 in place would count one
    # cycle fewer.
    cycled = replay(_held_back(with_b1=True), in_place=False)
    simulator = _held_back(with_b1=True)
    assert replay(simulator, in_place=True) == cycled
    assert simulator.settler.unparked_in_place == 0
    said = dict((key, message) for key, _, message in cycled[-1][-1][1])
    assert said["default/b1"] == "Workload no longer fits after processing another workload"


def _preempting() -> Simulator:
    """A full cohort of 9 GPUs: "p" (4) runs v1 (4); "b" (4, BestEffortFIFO)
    runs b0 (2, priority 20), lending the rest to "x" (none of its own),
    whose x1 (2, priority 30) holds it; "y" (1) runs y1 until 3. b2 (2,
    priority 10) fits nowhere and finds no victims: parked, it holds its 2
    GPUs in each cycle it is asked in (b reclaims only from lower
    priorities). p1 (4, priority 5) preempts v1 at 2, which takes 5 s to go:
    meanwhile p1 is asked in every cycle whether it still fits once v1 is
    gone. y1 ends at 3 (1 free); at 4 b2 is asked again, before p1, and holds
    2 GPUs: p1, asked after, no longer fits in that cycle."""
    b = _gpus("b", 4, "BestEffortFIFO")
    b["preemption"] = {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "LowerPriority",
    }
    p = _gpus("p", 4)
    p["preemption"] = {"withinClusterQueue": "LowerPriority"}
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [p, b, _gpus("x", 0), _gpus("y", 1)],
            "workloads": [
                _job("v1", "p", 4, 0),
                _job("b0", "b", 2, 0, priority=20),
                _job("x1", "x", 2, 0, priority=30),
                _job("y1", "y", 1, 0, runtime=3),
                _job("b2", "b", 2, 1, priority=10),
                _job("p1", "p", 4, 2, priority=5),
            ],
        }
    )
    return Simulator(
        scenario.policy,
        [(w, "class") for w in scenario.workloads],
        eviction_delay=5.0,
        horizon=100.0,
    )


def test_a_parked_head_holding_capacity_is_cycled_beside_a_head_that_reads_it() -> None:
    cycled = replay(_preempting(), in_place=False)
    simulator = _preempting()
    assert replay(simulator, in_place=True) == cycled
    assert simulator.settler.unparked_in_place == 0
    # At 4: told, then told again once b2 had parked (two cycles telling).
    at_four = [dict((k, m) for k, _, m in said) for now, said in cycled[-1] if now == 4.0]
    assert at_four[-1]["default/p1"].endswith("Pending the preemption of 1 workload(s)")


def test_a_tree_whose_only_ready_queue_is_stopped_is_never_remembered_quiet() -> None:
    # A cycle does not visit a stopped queue: "s"'s tree is not met, so it is
    # neither remembered quiet nor told to ask nothing, while "a"'s is.
    stopped = {**cohort_queue("s", 2, cohort="c2"), "stopPolicy": "Hold"}
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("a", 2, cohort="c1"), stopped],
            "workloads": [cohort_job("gang", "a", 4, 0), cohort_job("held", "s", 1, 0)],
        }
    )
    scheduler = Scheduler(scenario.policy, scenario.workloads)
    for _ in range(2):
        scheduler.cycle(1.0)
    assert set(scheduler._quiet) == {"c1"}
    assert scheduler._asks_nothing(scheduler.group_of["a"])
    assert not scheduler._asks_nothing(scheduler.group_of["s"])
