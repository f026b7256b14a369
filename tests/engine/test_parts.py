"""A split replay dealt into parts (``queues.engine.parts``), each part's
replays sent to another process (pickled) and run there, their results sent
back as JSON and merged, gives the whole replay's result; what the parts hand
over at a milestone, merged, is the whole replay stopped there (no
database)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.model import PodSet, Policy, Workload
from queues.engine.parts import deal, milestones, replay_part
from queues.engine.replay_records import SimulationResult, frame_of
from queues.engine.result_codec import from_json, to_json
from queues.engine.scenario import parse
from queues.engine.simulator import Simulator
from queues.engine.split import GroupReplay, group_replays, merge
from tests.engine.test_simulator import one_queue
from tests.engine.test_split import everything, streams

GPU = "nvidia.com/gpu"


def sent(result: SimulationResult) -> SimulationResult:
    return from_json(json.loads(json.dumps(to_json(result), allow_nan=False)))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams(), st.integers(1, 3))
def test_parts_replayed_apart_merge_to_the_whole_replay_and_its_figures_so_far(
    case: tuple[Policy, list[Workload], dict[str, Any]], workers: int
) -> None:
    policy, workloads, options = case
    stream = [(w, "c") for w in workloads]
    replays = group_replays(policy, copy.deepcopy(stream), **options)
    frame = frame_of((w for w, _ in stream), start=None, horizon=options["horizon"])
    dealt = deal({g: len(r.workloads) for g, r in replays.items()}, workers)
    assert sorted(g for part in dealt for g in part) == sorted(replays)
    results: dict[str, SimulationResult] = {}
    handed: dict[int, dict[str, SimulationResult]] = {}
    for part in dealt:
        # As a worker gets them: pickled.
        mine = pickle.loads(pickle.dumps({g: replays[g] for g in part}))

        def hand_over(index: int, at: float, figures: dict[str, SimulationResult]) -> None:
            for group, result in figures.items():
                handed.setdefault(index, {})[group] = sent(result)

        for group, result in replay_part(mine, frame, at_milestone=hand_over).items():
            results[group] = sent(result)

    whole = Simulator(policy, copy.deepcopy(stream), **options)
    assert everything(merge(results)) == everything(whole.run())

    whole = Simulator(policy, copy.deepcopy(stream), **options)
    whole.begin()
    marks = milestones(frame)
    assert sorted(handed) == list(range(len(marks)))
    for index, at in enumerate(marks):
        whole.advance(at)
        if whole.done:
            break
        merged, stopped = merge(handed[index]), whole.snapshot(at)
        assert merged.end == stopped.end == at
        assert merged.records == stopped.records
        assert merged.totals == stopped.totals
        assert merged.admissions == stopped.admissions


def test_groups_are_dealt_biggest_first_to_the_lightest_part() -> None:
    sizes = {"a": 50, "b": 30, "c": 25, "d": 10, "e": 5}
    assert deal(sizes, 2) == [["a", "d"], ["b", "c", "e"]]
    assert deal(sizes, 1) == [["a", "b", "c", "d", "e"]]
    # No part is empty: never more parts than groups.
    assert deal({"a": 1, "b": 0}, 8) == [["a"], ["b"]]


def test_a_burst_in_one_event_time_still_calls_between_inside_it() -> None:
    # 64 one-GPU jobs arrive at once in a queue of 64 GPUs: Kueue admits one
    # head per queue and cycle, so that one event time takes 64 cycles. A
    # worker beats through ``between``: it must not wait for the burst to end.
    policy = parse(one_queue("BestEffortFIFO", 64)).policy
    stream = [
        (
            Workload(
                name=f"j{i}",
                cluster_queue="q",
                pod_sets=(PodSet("main", 1, {GPU: 1}),),
                creation_time=0.0,
                runtime=600.0,
            ),
            "c",
        )
        for i in range(64)
    ]
    replays = group_replays(policy, stream)
    frame = frame_of((w for w, _ in stream), start=None, horizon=None)
    shares: list[float] = []
    results = replay_part(replays, frame, between=shares.append, between_every=0.0)
    assert sum(r.admissions for r in results.values()) == 64
    assert len(shares) >= 64
    assert all(0.0 <= share <= 1.0 for share in shares)
    assert shares[-1] == 1.0


def independent_queues(gpus: int, *names: str) -> Policy:
    """``one_queue``'s queue "q" and copies of it named ``names``, each a
    cohort tree of its own."""
    document = one_queue("BestEffortFIFO", gpus)
    for name in names:
        other = copy.deepcopy(document["clusterQueues"][0])
        other["name"] = name
        document["clusterQueues"].append(other)
    return parse(document).policy


def test_the_share_told_inside_slices_never_goes_back() -> None:
    # Two independent queues, each with a burst inside the first hour-long
    # slice: "q" advances first and cycles its burst at 3,000 s, then "q2"
    # cycles its own at 600 s. The share told must not step back with it.
    policy = independent_queues(64, "q2")
    span = 500 * 3600.0  # 500 slices of an hour

    def burst(queue: str, at: float) -> list[tuple[Workload, str]]:
        return [
            (
                Workload(
                    name=f"{queue}-{i}",
                    cluster_queue=queue,
                    pod_sets=(PodSet("main", 1, {GPU: 1}),),
                    creation_time=at,
                    runtime=7200.0,
                ),
                "c",
            )
            for i in range(32)
        ]

    stream = [*burst("q", 3000.0), *burst("q2", 600.0)]
    replays = group_replays(policy, stream, start=0.0, horizon=span)
    assert list(replays) == sorted(replays, key=lambda g: "q2" in g)  # "q" advances first
    frame = frame_of((w for w, _ in stream), start=0.0, horizon=span)
    shares: list[float] = []
    replay_part(replays, frame, between=shares.append, between_every=0.0)
    assert len(shares) > 64
    assert shares == sorted(shares)


class _Watched(Simulator):
    """A group's simulator that notes each advance it is given, by group."""

    def __init__(self, group: str, log: list[tuple[str, float]], *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.group = group
        self.log = log

    def advance(self, until: float = math.inf) -> bool:
        self.log.append((self.group, until))
        return super().advance(until)


@dataclasses.dataclass
class _WatchedReplay(GroupReplay):
    group: str = ""
    log: list[tuple[str, float]] = dataclasses.field(default_factory=list)

    def simulator(self) -> Simulator:
        return _Watched(self.group, self.log, self.policy, self.workloads, **self.options)


def test_a_part_advances_each_replay_to_a_milestone_before_the_next() -> None:
    # Three independent queues with work all through the span: between two
    # milestones, each group's replay goes there slice by slice before the
    # next group's starts (its state stays in the caches), never all three a
    # slice at a time; and the answers are the whole replay's.
    policy = independent_queues(4, "q2", "q3")
    stream = [
        (
            Workload(
                name=f"{queue}-{i}",
                cluster_queue=queue,
                pod_sets=(PodSet("main", 1, {GPU: 1}),),
                creation_time=i * 900.0,
                runtime=3600.0,
            ),
            "c",
        )
        for queue in ("q", "q2", "q3")
        for i in range(60)
    ]
    log: list[tuple[str, float]] = []
    replays = {
        group: _WatchedReplay(r.policy, r.workloads, r.options, group, log)
        for group, r in group_replays(policy, copy.deepcopy(stream)).items()
    }
    assert len(replays) == 3
    frame = frame_of((w for w, _ in stream), start=None, horizon=None)
    marks = milestones(frame)
    results = replay_part(replays, frame)
    for low, high in zip([frame.start, *marks], [*marks, math.inf], strict=True):
        groups = [group for group, until in log if low < until <= high]
        runs = [group for i, group in enumerate(groups) if i == 0 or groups[i - 1] != group]
        assert len(groups) > len(runs), (low, groups)  # several slices each
        assert sorted(runs) == sorted(set(runs)), (low, runs)  # one run a group
        if math.isfinite(high):
            # Each goes as far as the milestone and stops there.
            assert sorted(runs) == sorted(replays), (high, runs)
            for group in replays:
                assert max(u for g, u in log if g == group and u <= high) == high
    whole = Simulator(policy, copy.deepcopy(stream))
    assert everything(merge(results)) == everything(whole.run())


def test_the_share_never_reads_done_before_the_end() -> None:
    # Two jobs at once in one queue: the first admitted (by name) never
    # finishes (no timer), so between the two cycles of that instant the
    # replay has no event left and reads as done, until the second is
    # admitted. The share told in between must not say so and step back.
    policy = parse(one_queue("BestEffortFIFO", 4)).policy
    stream = [
        (
            Workload(
                name=name,
                cluster_queue="q",
                pod_sets=(PodSet("main", 1, {GPU: 1}),),
                creation_time=0.0,
                runtime=runtime,
            ),
            "c",
        )
        for name, runtime in (("a-forever", math.inf), ("b-brief", 100.0))
    ]
    replays = group_replays(policy, stream)
    frame = frame_of((w for w, _ in stream), start=None, horizon=None)
    shares: list[float] = []
    results = replay_part(replays, frame, between=shares.append, between_every=0.0)
    assert sum(r.admissions for r in results.values()) == 2
    assert shares == sorted(shares), shares
    assert shares[-1] == 1.0
    assert all(share < 1.0 for share in shares[:-1]), shares


def test_a_replay_over_before_the_span_counts_whole_at_once() -> None:
    # One queue's only job never finishes: its replay is over once it is
    # admitted, its clock far from the span's end. The share told right
    # after it must count it whole (half the part: one workload of two),
    # not wait for the part's end.
    policy = independent_queues(4, "q2")
    stream = [
        (
            Workload(
                name=name,
                cluster_queue=queue,
                pod_sets=(PodSet("main", 1, {GPU: 1}),),
                creation_time=0.0,
                runtime=runtime,
            ),
            "c",
        )
        for name, queue, runtime in (("forever", "q", math.inf), ("day", "q2", 86400.0))
    ]
    log: list[tuple[str, float]] = []
    made = group_replays(policy, stream)
    replays = {
        group: _WatchedReplay(
            made[group].policy, made[group].workloads, made[group].options, group, log
        )
        for group in sorted(made, key=lambda g: "q2" in g)  # the never-ending one first
    }
    frame = frame_of((w for w, _ in stream), start=None, horizon=None)
    told: list[tuple[int, float]] = []
    replay_part(replays, frame, between=lambda share: told.append((len(log), share)))
    first = next(iter(replays))
    its_last = max(i for i, (group, _) in enumerate(log) if group == first) + 1
    assert [share for seen, share in told if seen == its_last] == [0.5]
    assert [share for _, share in told] == sorted(share for _, share in told)
    assert told[-1][1] == 1.0
