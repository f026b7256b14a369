"""Running a scenario's workload stream through the simulator, under its own
policy or a proposed one, and comparing the two.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queues.engine.metrics import summarize
from queues.engine.model import Policy, Workload
from queues.engine.scenario import Scenario, ScenarioError
from queues.engine.simulator import SimulationResult, Simulator
from queues.errors import FieldError


def workload_stream(scenario: Scenario) -> list[tuple[Workload, str]]:
    """Fresh copies of the explicit workloads plus the generated ones, each with
    its class ("explicit" for listed workloads): the same stream every call."""
    stream = [(w.copied(), "explicit") for w in scenario.workloads]
    for workload_class in scenario.classes:
        stream.extend((w, workload_class.name) for w in workload_class.workloads())
    return stream


def check_compatible(stream: list[tuple[Workload, str]], policy: Policy, source: str) -> None:
    missing = sorted({w.cluster_queue for w, _ in stream} - set(policy.cluster_queues))
    if missing:
        raise ScenarioError(
            source,
            [
                FieldError(
                    "clusterQueues",
                    "missing-cluster-queue",
                    f"the workload stream uses cluster queue(s) {', '.join(missing)}, which "
                    "this policy does not define",
                )
            ],
        )


def simulate(
    scenario: Scenario,
    policy: Policy | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    requeue_delay: float | None = None,
    eviction_delay: float | None = None,
) -> tuple[SimulationResult, dict[str, Any]]:
    """Run the scenario's stream under its policy (or ``policy``), timed as
    its ``simulation:`` block says unless the delays are given."""
    stream = workload_stream(scenario)
    chosen = policy or scenario.policy
    check_compatible(stream, chosen, scenario.source)
    result = Simulator(
        chosen,
        stream,
        progress=progress,
        requeue_delay=scenario.timing.requeue_delay if requeue_delay is None else requeue_delay,
        eviction_delay=(
            scenario.timing.eviction_delay if eviction_delay is None else eviction_delay
        ),
    ).run()
    return result, summarize(result)


def _delta(a: float | None, b: float | None, unit: str = "") -> str:
    if a is None or b is None:
        return "–"
    change = b - a
    if a:
        return f"{change:+.1f}{unit} ({change / a:+.0%})"
    return f"{change:+.1f}{unit}"


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[list[str]]:
    """Metric, first policy, second policy, change."""

    def num(value: Any) -> str:
        return (
            "–" if value is None else (f"{value:.1f}" if isinstance(value, float) else str(value))
        )

    rows = []
    for label, key in (
        ("time to admission avg (s)", "avg"),
        ("p50 (s)", "p50"),
        ("p95 (s)", "p95"),
        ("max (s)", "max"),
    ):
        x, y = a["time_to_admission"][key], b["time_to_admission"][key]
        rows.append([label, num(x), num(y), _delta(x, y, " s")])
    for label, x, y in (
        ("preemptions", sum(a["preemptions"].values()), sum(b["preemptions"].values())),
        ("GPU-seconds lost", a["lost_gpu_seconds"], b["lost_gpu_seconds"]),
        ("scheduling cycles", a["cycles"], b["cycles"]),
    ):
        rows.append([label, num(x), num(y), _delta(float(x), float(y))])
    for name in sorted(set(a["cluster_queues"]) & set(b["cluster_queues"])):
        x = a["cluster_queues"][name]["time_to_admission"]["p95"]
        y = b["cluster_queues"][name]["time_to_admission"]["p95"]
        rows.append([f"{name}: p95 wait (s)", num(x), num(y), _delta(x, y, " s")])
    return rows
