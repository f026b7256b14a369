"""What a replay holds per workload: workloads that ask alike share their pod
sets and their queue's and namespace's names, and the replay lets a workload
go once it has finished (a month of a large organisation is a million of
them: tens of bytes each is tens of megabytes)."""

from __future__ import annotations

import sys

import pytest

from queues.engine import model
from queues.engine.model import PodSet, Toleration, Workload
from queues.engine.parts import replay_part
from queues.engine.replay_records import SimulationResult, frame_of
from queues.engine.simulator import Simulator
from queues.engine.split import group_replays
from queues.engine.topology import TopologyRequest
from tests.engine.test_simulator_window import job, policy

GPU = "nvidia.com/gpu"


def workload(name: str, *pod_sets: PodSet, queue: str = "research") -> Workload:
    return Workload(name=name, cluster_queue=queue, pod_sets=pod_sets, namespace="team-a")


def gpus(count: int = 1, per_pod: int = 8, **extra: object) -> PodSet:
    return PodSet("main", count, {GPU: per_pod, "cpu": 24_000}, **extra)  # type: ignore[arg-type]


def test_workloads_asking_alike_share_one_tuple_of_pod_sets() -> None:
    first = workload("a", gpus(2), PodSet("launcher", 1, {"cpu": 1000}))
    second = workload("b", gpus(2), PodSet("launcher", 1, {"cpu": 1000}))
    assert second.pod_sets is first.pod_sets
    assert first.pod_sets == (gpus(2), PodSet("launcher", 1, {"cpu": 1000}))


@pytest.mark.parametrize(
    "other",
    [
        gpus(3),
        gpus(2, per_pod=4),
        PodSet("main", 2, {"cpu": 24_000, GPU: 8}),  # the same requests listed in another order
        gpus(2, node_selector={"pool": "a"}),
        gpus(2, tolerations=(Toleration("spot", "Exists"),)),
        gpus(2, min_count=1),
        gpus(2, topology_request=TopologyRequest("rack", True)),
        PodSet("worker", 2, {GPU: 8, "cpu": 24_000}),
    ],
)
def test_pod_sets_that_ask_differently_are_not_shared(other: PodSet) -> None:
    # Listed in another order, requests are equal but word messages differently.
    alike = workload("a", gpus(2))
    unlike = workload("b", other)
    assert unlike.pod_sets is not alike.pod_sets
    assert unlike.pod_sets == (other,)


def test_queue_and_namespace_names_are_held_once() -> None:
    built = "".join(["re", "search"])
    first, second = workload("a", gpus(), queue=built), workload("b", gpus(), queue="research")
    assert first.cluster_queue is second.cluster_queue
    assert first.namespace is second.namespace
    assert first.key == "team-a/a"


def test_pod_sets_that_cannot_be_compared_by_value_are_kept_as_given() -> None:
    odd = PodSet("main", 1, {GPU: 1}, tolerations=[Toleration("spot", "Exists")])  # type: ignore[arg-type]
    given = (odd,)
    assert workload("a", *given).pod_sets == given


def test_the_table_of_shapes_starts_again_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_POD_SETS", {})
    monkeypatch.setattr(model, "_POD_SETS_KEPT", 5)
    for count in range(1, 13):
        workload(f"w{count}", gpus(count))
        assert 1 <= len(model._POD_SETS) <= 5
    # Still shared after a fresh start.
    assert workload("x", gpus(12)).pod_sets is workload("y", gpus(12)).pod_sets


def test_a_finished_workload_is_let_go_by_the_replay() -> None:
    workloads = [job("a", 0, 100), job("b", 10, 50), job("c", 20, 500)]
    first, last = workloads[0][0], workloads[2][0]
    simulator = Simulator(policy(nominal=16), workloads)
    del workloads
    simulator.begin()
    simulator.advance(until=200)  # a and b have finished, c is running
    assert simulator.records[first.key].finished == 100
    # This frame's own name and getrefcount's argument: nothing of the replay's.
    assert sys.getrefcount(first) == 2
    assert sys.getrefcount(last) > 2  # still running: the scheduler holds it
    assert simulator.advance()
    assert simulator.result().records[last.key].finished == 561
    assert sys.getrefcount(last) == 2


def test_records_follow_arrivals_and_the_result_lists_every_workload_as_given() -> None:
    # Given out of time order; "late" arrives past the horizon, never.
    workloads = [job("b", 30, 10), job("late", 500, 10), job("a", 0, 10), job("c", 30, 10)]
    simulator = Simulator(policy(), workloads, start=0.0, horizon=400.0)
    simulator.begin()
    simulator.advance(until=20)
    assert list(simulator.records) == ["default/a"]  # only what has arrived
    simulator.advance()
    result = simulator.result()
    assert list(result.records) == ["default/b", "default/late", "default/a", "default/c"]
    late = result.records["default/late"]
    assert (late.created, late.first_admitted, late.measured) == (500, None, True)
    admitted = [result.records[f"default/{name}"].first_admitted for name in "bc"]
    assert admitted == [30, 41]


def test_pod_sets_given_as_a_generator_are_shared_whole() -> None:
    odd = gpus(3, per_pod=5)  # a shape no other test makes: this one is the first
    generated = Workload("a", "research", (p for p in (odd,)), namespace="team-a")  # type: ignore[arg-type]
    assert generated.pod_sets == (odd,)
    assert workload("b", odd).pod_sets == (odd,)


def test_an_amount_of_another_type_is_not_shared() -> None:
    whole = workload("a", PodSet("main", 1, {"cpu": 1000}))
    other = workload("b", PodSet("main", 1, {"cpu": 1000.0}))  # type: ignore[dict-item]
    assert type(other.pod_sets[0].requests["cpu"]) is float
    assert type(whole.pod_sets[0].requests["cpu"]) is int


def test_a_replay_begins_once_and_stops_only_for_a_workload_it_was_given() -> None:
    simulator = Simulator(policy(), [job("a", 0, 10)])
    simulator.begin()
    with pytest.raises(RuntimeError, match="begins once"):
        simulator.run()
    with pytest.raises(KeyError, match="nobody"):
        Simulator(policy(), [job("a", 0, 10)], until_admitted="default/nobody")


def test_a_snapshot_of_a_replay_stopped_early_lists_what_was_created_by_then() -> None:
    # The replay stops once "a" is admitted; "b" and "c" are created before 80 all the same.
    workloads = [job("a", 0, 10), job("b", 50, 10), job("c", 60, 10), job("d", 90, 10)]
    simulator = Simulator(policy(), workloads, start=0.0, horizon=100.0, until_admitted="default/a")
    simulator.run()
    assert list(simulator.records) == ["default/a"]
    snapshot = simulator.snapshot(80.0, clamp=False)
    assert list(snapshot.records) == ["default/a", "default/b", "default/c"]
    assert snapshot.records["default/b"].first_admitted is None
    assert list(simulator.records) == ["default/a"]  # reading it changed nothing


def test_a_part_of_a_split_replay_lets_its_finished_workloads_go_too() -> None:
    # As a worker replays its part (queues.engine.parts): its replays are
    # spent, their simulators holding the workloads, so one that has finished
    # is held by nothing of the part's by the next milestone.
    workloads = [job("a", 0, 100), job("b", 10, 50), job("c", 20, 2_000)]
    first = workloads[0][0]
    replays = group_replays(policy(nominal=16), workloads)
    frame = frame_of((w for w, _ in workloads), start=None, horizon=None)
    del workloads
    held: list[tuple[float, int]] = []

    def hand_over(index: int, at: float, figures: dict[str, SimulationResult]) -> None:
        held.append((at, sys.getrefcount(first)))

    replay_part(replays, frame, at_milestone=hand_over)
    after = [count for at, count in held if at > 100]
    assert after and set(after) == {2}, held  # this frame (its closure cell) and the argument
    assert all(not replay.workloads for replay in replays.values())
