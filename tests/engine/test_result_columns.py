"""A replay's result sent between processes as columns
(``result_codec.to_columns``, as ``bench/tree_by_tree.py``'s workers send
theirs) comes back equal, and a split replay sent so merges to the whole."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

from hypothesis import HealthCheck, given, settings

from queues.engine.model import Policy, Workload
from queues.engine.replay_records import SimulationResult, WorkloadRecord
from queues.engine.result_codec import from_columns, to_columns
from queues.engine.simulator import Simulator
from queues.engine.split import group_simulators, merge
from tests.engine.test_split import everything, streams


def sent(result: SimulationResult) -> SimulationResult:
    return from_columns(*pickle.loads(pickle.dumps(to_columns(result))))


def test_every_field_of_every_record_comes_back_in_its_place() -> None:
    # Each field unlike its default and unlike the others: one put in
    # another's place would not compare equal.
    records = {
        key: WorkloadRecord(
            key=key,
            cluster_queue=f"cq-{key}",
            workload_class="training-large",
            priority=7 + index,
            created=11.5 + index,
            gpus=8,
            first_admitted=20.25,
            finished=float("inf"),
            preemptions=2,
            preemptions_by_reason={"InCohortReclamation": 2},
            lost_seconds=3.5,
            lost_gpu_seconds=28.0,
            measured=False,
            timed_out=40.0,
            pods_ready_timeouts=1,
            requeue_limit_exceeded=41.0,
        )
        for index, key in enumerate(["team-a/job-1", "team-b/job-2"])
    }
    fields = {f.name for f in dataclasses.fields(WorkloadRecord)}
    default = WorkloadRecord("k", "cq", "c", 0, 0.0, 0)
    record = records["team-a/job-1"]
    assert {name for name in fields if getattr(record, name) == getattr(default, name)} == set()
    result = SimulationResult(
        start=0.0,
        end=50.0,
        records=records,
        totals={},
        nominal={},
        preemptions_by_reason={"InCohortReclamation": 4},
        preemptions_by_queue={},
        series={"t": [0.0, 25.0]},
        cycles=9,
        admissions=2,
        admission_log=[("cq-a", 20.25, 8.75)],
    )
    back = sent(result)
    assert list(back.records) == list(records)
    assert back.records == records
    assert everything(back) == everything(result)
    assert back == result


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_groups_replayed_apart_and_sent_as_columns_merge_to_the_whole_replay(
    case: tuple[Policy, list[Workload], dict[str, Any]],
) -> None:
    policy, workloads, options = case
    whole = Simulator(policy, [(w, "c") for w in copy.deepcopy(workloads)], **options).run()
    groups = group_simulators(policy, [(w, "c") for w in copy.deepcopy(workloads)], **options)
    results = {group: sent(simulator.run()) for group, simulator in groups.items()}
    assert everything(merge(results)) == everything(whole)
