"""Workload.copied: what a replay starts from instead of a deepcopy. A copy
equals its original and shares no state the engine changes, so replaying it
leaves the original (the next replay's template) as it was."""

from __future__ import annotations

import dataclasses

from queues.engine.model import CheckState, PodSet, Workload

SHARED = {"pod_sets"}  # frozen pod sets, whose requests nothing changes


def busy_workload() -> Workload:
    return Workload(
        name="trainer",
        cluster_queue="research",
        pod_sets=(PodSet("main", 2, {"nvidia.com/gpu": 8}),),
        namespace="research",
        runtime_range=(60.0, 600.0),
        admission={"main": {"nvidia.com/gpu": "h100"}},
        admitted_at=5.0,
        check_states={"berth-approval": CheckState.PENDING},
        check_retry_after={"berth-approval": 30.0},
        admitted_counts={"main": 2},
        topology_assignment={"main": {"node-0": 1, "node-1": 1}},
    )


def test_a_copy_equals_its_original_and_shares_no_mutable_state() -> None:
    original = busy_workload()
    twin = original.copied()
    assert twin == original and twin.key == original.key == "research/trainer"
    for field in dataclasses.fields(Workload):
        value = getattr(original, field.name)
        if isinstance(value, dict | list | set) and field.name not in SHARED:
            assert getattr(twin, field.name) is not value, field.name


def test_changing_a_copy_leaves_the_original_as_it_was() -> None:
    original = busy_workload()
    twin = original.copied()
    assert twin.admission is not None and twin.topology_assignment is not None
    twin.admission["main"]["nvidia.com/gpu"] = "a100"
    twin.topology_assignment["main"]["node-2"] = 1
    twin.check_states["berth-approval"] = CheckState.READY
    twin.check_retry_after.clear()
    twin.admitted_counts = None
    twin.creation_time = 99.0
    assert original == busy_workload()
