"""The shipped performance scenarios are Kueue's own (test/performance/scheduler,
its baseline and large-scale generator configurations), as Kueue runs them:
each class's first arrival one interval after the start, an evicted
workload's quota released at once (the perf runner clears the reservation),
requeues in one-second batches. The Poisson variant keeps the rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from queues.engine.experiment import workload_stream
from queues.engine.scenario import load

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
# (count per queue, interval s, runtime s, priority, cpu) per class, from Kueue.
BASELINE = {
    "small": (350, 0.1, 0.2, 50, 1000),
    "medium": (100, 0.5, 0.5, 100, 5000),
    "large": (50, 1.2, 1.0, 200, 20000),
}
LARGE = {
    "small": (35, 0.06, 0.15, 50, 1000),
    "medium": (11, 0.3, 0.35, 100, 5000),
    "large": (4, 0.7, 0.7, 200, 20000),
}


@pytest.mark.parametrize(
    ("name", "classes", "cohorts", "queues"),
    [("kueue-perf-baseline", BASELINE, 5, 30), ("kueue-perf-large", LARGE, 10, 1000)],
)
def test_kueues_configuration(
    name: str, classes: dict[str, tuple[float, ...]], cohorts: int, queues: int
) -> None:
    scenario = load(SCENARIOS / f"{name}.yaml")
    policy = scenario.policy
    assert len(policy.cohorts) == cohorts and len(policy.cluster_queues) == queues
    for queue in policy.cluster_queues.values():
        quota = queue.resource_groups[0].flavors[0].resources["cpu"]
        assert (quota.nominal, quota.borrowing_limit) == (20000, 100000)  # 20 and 100 cpu
        assert queue.preemption.reclaim_within_cohort.value == "Any"
        assert queue.preemption.within_cluster_queue.value == "LowerPriority"
    assert (scenario.timing.requeue_delay, scenario.timing.eviction_delay) == (1.0, 0.0)
    assert {c.name for c in scenario.classes} == set(classes)
    for generated in scenario.classes:
        count, interval, runtime, priority, cpu = classes[generated.name]
        assert (generated.count_per_queue, generated.interval) == (count, interval)
        assert generated.start == interval  # Kueue's generator waits before each create
        assert (generated.runtime.median, generated.runtime.mean) == (runtime, None)
        assert generated.priority == priority
        assert generated.pod_sets[0].requests == {"cpu": cpu}
    stream = workload_stream(scenario)
    assert len(stream) == sum(c[0] for c in classes.values()) * queues
    first = min(w.creation_time for w, _ in stream)
    assert first == pytest.approx(min(c[1] for c in classes.values()))


def test_the_poisson_variant_keeps_the_baselines_rates() -> None:
    fixed = load(SCENARIOS / "kueue-perf-baseline.yaml")
    poisson = load(SCENARIOS / "kueue-perf-baseline-poisson.yaml")
    assert poisson.policy == fixed.policy and poisson.timing == fixed.timing
    rates = {c.name: c.rate for c in poisson.classes}
    for generated in fixed.classes:
        assert rates[generated.name] == pytest.approx(1 / generated.interval, rel=1e-3)
