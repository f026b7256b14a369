"""The simulator as a what-if replays a window: waits of workloads never
admitted are censored (at the horizon, or at the end of the run), the clock
stops at the horizon, context workloads take quota without being counted,
recorded admission-check delays, heads behind an inadmissible head in the
same instant, parked workloads queued again at once, and every admission
logged the way the dashboard counts it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from queues.engine.metrics import summarize, wait_stats
from queues.engine.model import PodSet, Workload
from queues.engine.scenario import parse
from queues.engine.simulator import SimulationResult, Simulator, WorkloadRecord
from tests.engine.test_simulator import one_queue

GPU = "nvidia.com/gpu"


def policy(nominal: int = 8, checks: bool = False, strategy: str = "BestEffortFIFO") -> Any:
    document = one_queue(strategy, nominal)
    if checks:
        document["clusterQueues"][0]["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": "approval"}]
        }
    return parse(document).policy


def job(name: str, at: float, runtime: float, gpus: int = 8, **extra: Any) -> tuple[Workload, str]:
    workload = Workload(
        name=name,
        cluster_queue="q",
        pod_sets=(PodSet("main", 1, {GPU: gpus}),),
        creation_time=at,
        runtime=runtime,
        **extra,
    )
    return workload, "c"


def run(workloads: list[tuple[Workload, str]], **options: Any) -> SimulationResult:
    return Simulator(policy(**options.pop("policy", {})), workloads, **options).run()


def record(created: float, admitted: float | None) -> WorkloadRecord:
    return WorkloadRecord("k", "q", "c", 0, created, 1, first_admitted=admitted)


def test_a_workload_never_admitted_waits_until_the_end_at_least() -> None:
    # "huge" asks for 16 GPUs of 8: it never fits; the run ends when "a" finishes.
    result = run([job("a", 0, 100), job("huge", 10, 50, gpus=16)])
    summary = summarize(result)
    queue = summary["cluster_queues"]["q"]
    assert queue["never_admitted"] == summary["never_admitted"] == 1
    wait = queue["time_to_admission"]
    assert wait["admitted"] == 1 and wait["never_admitted"] == 1
    # Created at 10, still waiting when the run ended (a finished, b was retried).
    assert wait["max"] == result.end - 10 >= 90.0
    assert wait["avg"] == wait["max"] / 2
    assert set(wait["at_least"]) == {"avg", "p95", "max"}  # lower bounds
    assert "p50" not in wait["at_least"]  # a's exact 0 s


def test_percentiles_are_lower_bounds_only_when_a_censored_wait_reaches_their_rank() -> None:
    exact = [record(0, float(i)) for i in range(19)]  # waits 0..18 s
    stats = wait_stats([*exact, record(0, None)], end=1000.0)
    assert stats["p95"] == 18.0 and stats["max"] == 1000.0
    assert stats["at_least"] == ["avg", "max"]  # the censored wait is above p95's rank
    # Censored at 3 s, at or below the median's rank: the median can only grow.
    early = wait_stats([*exact[:10], record(997, None)], end=1000.0)
    assert early["p50"] == 4.0 and "p50" in early["at_least"]
    # Censored at 5 s, after the exact 5 s at the rank: the median stays.
    tie = wait_stats([*exact[:10], record(995, None)], end=1000.0)
    assert tie["p50"] == 5.0 and "p50" not in tie["at_least"]
    assert wait_stats([], end=1.0) == {
        "admitted": 0,
        "never_admitted": 0,
        "avg": None,
        "p50": None,
        "p95": None,
        "max": None,
        "at_least": [],
    }


def test_the_horizon_stops_the_clock_and_what_comes_after_is_never_admitted() -> None:
    stream = [job("a", 0, 100), job("b", 10, 100), job("c", 20, 100)]
    whole = run(stream)
    assert whole.records["default/b"].first_admitted == 101.0  # after the requeue delay
    window = run([job("a", 0, 100), job("b", 10, 100), job("c", 20, 100)], horizon=100.0)
    assert window.end == 100.0 and window.horizon == 100.0
    summary = summarize(window)
    assert summary["never_admitted"] == 2  # b and c: not by the window's end
    assert summary["time_to_admission"]["max"] == 90.0  # b: from 10 to the end at 100
    # Usage over the window: 8 GPUs for 100 s of a nominal 8.
    assert summary["cluster_queues"]["q"]["resource_seconds"][GPU]["usage_ratio"] == 1.0
    # An admission exactly at the horizon is outside [start, horizon).
    edge = run([job("a", 0, 100), job("b", 10, 100)], horizon=101.0, requeue_delay=0.0)
    assert edge.records["default/b"].first_admitted == 100.0
    late = run([job("a", 0, 100), job("b", 10, 100)], horizon=100.0, requeue_delay=0.0)
    assert late.records["default/b"].first_admitted is None


def test_context_workloads_take_quota_but_are_not_counted() -> None:
    running = job("running", -50, 150, admission={"main": {GPU: "h100"}}, admitted_at=-50.0)
    result = run(
        [running, job("new", 10, 20)], start=0.0, horizon=200.0, context={"default/running"}
    )
    assert result.records["default/new"].first_admitted == 101.0  # after running's 100 s left
    summary = summarize(result)
    assert summary["workloads"] == 1 and summary["cluster_queues"]["q"]["workloads"] == 1
    assert summary["time_to_admission"]["max"] == 91.0
    # Its usage counts: 8 GPUs for its 100 s and new's 20 s.
    assert summary["cluster_queues"]["q"]["resource_seconds"][GPU]["used"] == 8 * 120.0


def test_admission_waits_for_the_recorded_check_delay_and_holds_the_quota() -> None:
    checked = {"policy": {"checks": True, "nominal": 16}}
    result = run(
        [job("approved", 0, 10), job("ignored", 0, 10), job("next", 5, 10)],
        check_delays={"default/approved": 30.0, "default/ignored": math.inf},
        horizon=100.0,
        **checked,
    )
    approved, ignored = result.records["default/approved"], result.records["default/ignored"]
    assert approved.first_admitted == 30.0  # admitted when its checks passed
    assert ignored.first_admitted is None  # never answered: still waiting
    # Both reserved at once; "ignored" keeps its half: "next" gets in when
    # "approved" is done.
    assert result.records["default/next"].first_admitted in (40.0, 41.0)
    assert summarize(result)["never_admitted"] == 1


def test_an_inadmissible_head_does_not_hold_back_the_next_in_the_same_instant() -> None:
    # "big" (16 GPUs) never fits an 8-GPU queue; "small", behind it, fits the half
    # that "half" leaves free. Kueue parks big and admits small in the next cycle.
    result = run(
        [job("half", 0, 100, gpus=4), job("big", 10, 10, gpus=16), job("small", 10, 10, gpus=4)]
    )
    assert result.records["default/small"].first_admitted == 10.0


def test_with_no_requeue_delay_parked_workloads_compete_in_order_at_once() -> None:
    # b (8 GPUs) waits, parked, for a; c (4 GPUs) arrives the moment a finishes.
    def stream() -> list[tuple[Workload, str]]:
        return [job("a", 0, 100), job("b", 10, 100), job("c", 100, 100, gpus=4)]

    kueue = run(stream())
    assert kueue.records["default/c"].first_admitted == 100.0  # b comes back a second late
    assert kueue.records["default/b"].first_admitted == 201.0
    at_once = run(stream(), requeue_delay=0.0)
    assert at_once.records["default/b"].first_admitted == 100.0  # older, first
    assert at_once.records["default/c"].first_admitted == 200.0


def test_every_admission_is_logged_with_its_wait_since_it_was_queued() -> None:
    result = run(
        [job("low", 0, 100), job("high", 40, 10, priority=10)],
        eviction_delay=0.0,
        requeue_delay=0.0,
    )
    log = sorted(result.admission_log, key=lambda entry: entry[1])
    # low at 0; high at 40 (preempting low); low again at 50, 10 s after its eviction.
    assert log == [("q", 0.0, 0.0), ("q", 40.0, 0.0), ("q", 50.0, 10.0)]


@pytest.mark.parametrize("horizon", [None, 500.0])
def test_progress_reaches_the_end(horizon: float | None) -> None:
    seen: list[tuple[int, int]] = []
    Simulator(
        policy(),
        [job("a", 0, 100), job("b", 0, 100)],
        horizon=horizon,
        progress=lambda d, t: seen.append((d, t)),
    ).run()
    assert seen and seen[-1][0] == seen[-1][1]  # done
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
