"""The simulator: clocked admissions, completions, requeue delays, preemption
with lost work, generated streams, reports and the simulate command."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from queues.engine.experiment import compare_rows, simulate, workload_stream
from queues.engine.scenario import parse
from queues.engine.simulator import Simulator

GPU = "nvidia.com/gpu"


def one_queue(strategy: str = "BestEffortFIFO", nominal: int = 8, **extra: Any) -> dict[str, Any]:
    return {
        "resourceFlavors": [{"name": "h100"}],
        "clusterQueues": [
            {
                "name": "q",
                "queueingStrategy": strategy,
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "h100", "resources": [{"name": GPU, "nominalQuota": nominal}]}
                        ],
                    }
                ],
            }
        ],
        **extra,
    }


def job(name: str, at: float, runtime: float, gpus: int = 8, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clusterQueue": "q",
        "creationTime": at,
        "runtime": runtime,
        "podSets": [{"count": gpus, "requests": {GPU: 1}}],
        **extra,
    }


def admitted_at(document: dict[str, Any]) -> dict[str, float | None]:
    result, _ = simulate(parse(document))
    return {k.split("/")[-1]: r.first_admitted for k, r in result.records.items()}


def test_best_effort_fifo_waits_for_the_requeue_after_capacity_frees() -> None:
    times = admitted_at(one_queue(workloads=[job("a", 0, 100), job("b", 0, 100), job("c", 0, 100)]))
    # b and c are parked when they do not fit; Kueue queues them again ~1 s after
    # a finishes, so each waits for its predecessor plus the requeue delay.
    assert times == {"a": 0.0, "b": 101.0, "c": 202.0}


def test_strict_fifo_head_stays_and_is_admitted_as_soon_as_it_fits() -> None:
    times = admitted_at(one_queue("StrictFIFO", workloads=[job("a", 0, 100), job("b", 0, 100)]))
    assert times == {"a": 0.0, "b": 100.0}


def test_preemption_loses_the_work_since_the_last_checkpoint() -> None:
    document = one_queue(
        workloads=[
            job("low", 0, 100, checkpointInterval=30),
            job("high", 45, 10, priority=10),
        ]
    )
    result, summary = simulate(parse(document), eviction_delay=30)
    low, high = result.records["default/low"], result.records["default/high"]
    # low is told to stop at 45 and holds its GPUs for the 30 s it takes to go.
    assert high.first_admitted == 75.0
    assert low.preemptions == 1
    assert low.lost_seconds == pytest.approx(15.0)  # 45 s done, last checkpoint at 30 s
    assert low.lost_gpu_seconds == pytest.approx(15.0 * 8)
    # Back after high finishes at 85 (+1 s requeue), with 70 s of work left.
    assert low.finished == pytest.approx(86.0 + 70.0)
    assert summary["preemptions"] == {"InClusterQueue": 1}
    assert summary["lost_gpu_seconds"] == pytest.approx(120.0)


def test_without_an_eviction_delay_the_preemptor_starts_at_once() -> None:
    document = one_queue(workloads=[job("low", 0, 100), job("high", 45, 10, priority=10)])
    result, _ = simulate(parse(document), eviction_delay=0)
    assert result.records["default/high"].first_admitted == 45.0
    assert result.records["default/low"].lost_seconds == pytest.approx(45.0)  # no checkpoints


def test_usage_ratio_and_borrowing_are_integrated_over_time() -> None:
    document = {
        "resourceFlavors": [{"name": "h100"}],
        "cohorts": [{"name": "c"}],
        "clusterQueues": [
            {
                "name": name,
                "cohortName": "c",
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4}]}
                        ],
                    }
                ],
            }
            for name in ("q", "idle")
        ],
        "workloads": [job("big", 0, 100, gpus=8)],
    }
    _result, summary = simulate(parse(document))
    busy = summary["cluster_queues"]["q"]["resource_seconds"][GPU]
    idle = summary["cluster_queues"]["idle"]["resource_seconds"][GPU]
    assert busy["used"] == pytest.approx(800.0)
    assert busy["usage_ratio"] == pytest.approx(2.0)  # 8 used of a nominal 4
    assert busy["borrowed"] == pytest.approx(400.0)
    assert idle["lent"] == pytest.approx(400.0)


def test_generated_streams_are_deterministic_and_follow_their_distributions() -> None:
    document = one_queue(
        generate={
            "seed": 7,
            "classes": [
                {
                    "name": "train",
                    "countPerQueue": 2000,
                    "rate": 0.5,
                    "runtime": {"median": 874, "mean": 18000},
                    "podSets": [{"requests": {GPU: 1}}],
                    "gpusPerJob": {"choices": [1, 8], "weights": [3, 1]},
                }
            ],
        }
    )
    first = workload_stream(parse(document))
    second = workload_stream(parse(document))
    assert [(w.creation_time, w.runtime) for w, _ in first] == [
        (w.creation_time, w.runtime) for w, _ in second
    ]
    runtimes = sorted(w.runtime or 0 for w, _ in first)
    assert 700 < statistics.median(runtimes) < 1050  # lognormal median 874 s
    gaps = [b.creation_time - a.creation_time for (a, _), (b, _) in itertools.pairwise(first)]
    assert 1.7 < statistics.mean(gaps) < 2.3  # Poisson at 0.5 per second
    eights = sum(1 for w, _ in first if w.pod_sets[0].requests[GPU] == 8)
    assert 380 < eights < 620  # a quarter of the jobs ask for 8 GPUs
    other_seed = workload_stream(
        parse({**document, "generate": {**document["generate"], "seed": 8}})
    )
    assert [w.runtime for w, _ in other_seed] != [w.runtime for w, _ in first]


def test_compare_replays_the_same_stream_under_both_policies() -> None:
    stream = {"workloads": [job(f"j{i}", i, 50, gpus=4) for i in range(6)]}
    small = parse(one_queue(**stream))
    bigger = one_queue(**stream)
    bigger["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"
    ] = 24
    _, a = simulate(small)
    _, b = simulate(small, parse(bigger).policy)
    rows = {row[0]: row for row in compare_rows(a, b)}
    assert a["workloads"] == b["workloads"] == 6
    assert float(rows["p95 (s)"][2]) < float(rows["p95 (s)"][1])


def test_simulate_command_writes_json_and_a_self_contained_html(tmp_path: Path) -> None:
    scenario = tmp_path / "current.yaml"
    proposed = tmp_path / "proposed.yaml"
    scenario.write_text(yaml.safe_dump(one_queue(workloads=[job("a", 0, 10), job("b", 1, 10)])))
    document = one_queue()
    document["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"
    ] = 16
    proposed.write_text(yaml.safe_dump(document))
    out_json, out_html = tmp_path / "out.json", tmp_path / "out.html"
    call_command(
        "simulate",
        str(scenario),
        "--compare",
        str(proposed),
        "--json",
        str(out_json),
        "--html",
        str(out_html),
    )
    payload = json.loads(out_json.read_text())
    assert set(payload) == {"current", "proposed", "comparison"}
    assert payload["current"]["workloads"] == payload["proposed"]["workloads"] == 2
    page = out_html.read_text()
    assert "Berth simulation" in page and "Plotly" in page
    assert "<script src=" not in page and '<link rel="stylesheet" href="http' not in page


def test_each_workload_class_counts_its_preemptions_by_reason() -> None:
    # batch (generated, in b) borrows a's quota and is reclaimed by mid; mid
    # (explicit) is then preempted inside a by top, since a may not borrow.
    def queue(name: str, **extra: Any) -> dict[str, Any]:
        flavors = [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4, **extra}]}]
        return {
            "name": name,
            "cohortName": "c",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}],
        }

    document = {
        "resourceFlavors": [{"name": "h100"}],
        "cohorts": [{"name": "c"}],
        "clusterQueues": [queue("a", borrowingLimit=0), queue("b")],
        "workloads": [
            job("mid", 10, 1000, gpus=4, priority=5) | {"clusterQueue": "a"},
            job("top", 100, 10, gpus=4, priority=10) | {"clusterQueue": "a"},
        ],
        "generate": {
            "seed": 1,
            "classes": [
                {
                    "name": "batch",
                    "clusterQueues": ["b"],
                    "countPerQueue": 1,
                    "interval": 1,
                    "runtime": 1000,
                    "podSets": [{"requests": {GPU: 1}}],
                    "gpusPerJob": {"choices": [8], "weights": [1]},
                }
            ],
        },
    }
    _, summary = simulate(parse(document), eviction_delay=30)
    classes = summary["classes"]
    assert classes["batch"]["preemptions"] == 1
    assert classes["batch"]["preemptions_by_reason"] == {"InCohortReclamation": 1}
    assert classes["explicit"]["preemptions"] == 1
    assert classes["explicit"]["preemptions_by_reason"] == {"InClusterQueue": 1}
    assert summary["preemptions"] == {"InClusterQueue": 1, "InCohortReclamation": 1}
    json.dumps(summary)  # what --json writes


def test_a_workload_that_finished_or_timed_out_leaves_nothing_of_its_runs_behind() -> None:
    # A replay of a million workloads held each one's run start and timer
    # generation to the end: a hundred bytes a workload of its peak memory.
    document = one_queue(
        workloads=[
            job("a", 0, 100),
            job("b", 0, 100, maximumExecutionTimeSeconds=50),
            job("c", 1, 30),
        ]
    )
    scenario = parse(document)
    simulator = Simulator(scenario.policy, workload_stream(scenario), eviction_delay=0.0)
    result = simulator.run()
    assert result.records["default/b"].timed_out is not None
    assert result.records["default/a"].finished is not None
    assert simulator._run_started == {} and simulator._generation == {}
