"""``bench/month_trace.py`` works out each class's draws once (``_Draws``)
instead of asking ``rng.choices`` and ``Runtime.sample`` per workload: the
trace must be the one those give, draw for draw, or every figure and digest
made from it moves."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from month_trace import LOADS, _Draws, generate

from queues.engine.generate import Runtime


def test_each_class_draws_what_choices_and_sample_draw() -> None:
    for load in LOADS:
        draws = _Draws(load)
        asked, worked_out = random.Random(7), random.Random(7)
        for _ in range(2_000):
            gpus = asked.choices(load.gpus[0], weights=load.gpus[1])[0]
            runtime = min(load.runtime.sample(asked), load.cap)
            assert draws.gpus(worked_out) == gpus, load.name
            drawn = draws.runtime(worked_out)
            assert drawn == runtime, load.name  # equal floats, not close ones
        assert draws.priority == load.priority


def test_a_class_with_a_fixed_runtime_takes_no_draw_for_it() -> None:
    """Runtime.sample gives the median, drawing nothing, when no mean above
    it is given: the draws after it stay where they were."""
    for runtime in (Runtime(300.0), Runtime(300.0, 200.0)):
        load = dataclasses.replace(LOADS[0], runtime=runtime)
        draws = _Draws(load)
        asked, worked_out = random.Random(3), random.Random(3)
        for _ in range(50):
            assert draws.runtime(worked_out) == min(load.runtime.sample(asked), load.cap)
            assert draws.gpus(worked_out) == asked.choices(load.gpus[0], weights=load.gpus[1])[0]


def test_a_trace_made_tree_by_tree_is_the_one_made_in_arrival_order() -> None:
    """``generate`` draws in arrival order and makes the workloads tree by
    tree, each in its place: with one tree that is arrival order, and with
    four every workload is the same but for the urgent-release queue it is
    sent to (one a tree), in the same place in the list."""

    def trace(divisions: int) -> list[tuple[object, ...]]:
        args = argparse.Namespace(workloads=4_000, teams=12, days=3, divisions=divisions, seed=5)
        made = generate(args, lambda done: None)
        return [
            (
                w.name,
                w.namespace,
                "urgent" if w.cluster_queue.startswith("urgent-release") else w.cluster_queue,
                w.pod_sets,
                w.priority,
                w.creation_time,
                w.runtime,
                w.checkpoint_interval,
                load,
            )
            for w, load in made.workloads
        ]

    one_tree, four_trees = trace(1), trace(4)
    assert [row[0] for row in one_tree] == [f"job-{i:07d}" for i in range(4_000)]
    assert [row[5] for row in one_tree] == sorted(row[5] for row in one_tree)
    assert four_trees == one_tree


def test_the_trace_is_the_one_made_in_arrival_order_before_trees_came_first() -> None:
    """Every workload, its class, and what each queue is offered and its
    largest job, as 1d21020's ``generate`` (made in arrival order) gave them
    for this seed: hashed, so that a change made alike in the draws of one
    tree and of four is caught too."""
    args = argparse.Namespace(workloads=4_000, teams=12, days=3, divisions=4, seed=5)
    made = generate(args, lambda done: None)
    digest = hashlib.sha256()
    for workload, load in made.workloads:
        digest.update(repr((workload, load)).encode())
    digest.update(repr(list(made.offered.items())).encode())
    digest.update(repr(list(made.biggest.items())).encode())
    assert digest.hexdigest() == "f103c8f124bf4132cae8a7c7208e1d9b1abae32aafab29676842ea499b5a19d8"
