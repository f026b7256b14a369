"""Replays advanced together in slices of simulated time, and read while they
run (``queues.engine.lockstep``, ``Simulator.snapshot``): reading changes
nothing, and what is read at a time is what a replay stopped there gives
(hypothesis, no database)."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.lockstep import replay_together
from queues.engine.metrics import summarize
from queues.engine.model import Policy, Workload
from queues.engine.simulator import SimulationResult, Simulator
from tests.engine.test_properties import draw_workloads, policies


@st.composite
def streams(draw: Any) -> tuple[Policy, Policy, list[Workload], float | None]:
    workloads_of = draw(policies())
    other = draw(policies())
    # The second policy must know the first's queues: the same policy, or, when
    # the drawn one has the same queue names, that one.
    second = (
        other if set(other.cluster_queues) == set(workloads_of.cluster_queues) else workloads_of
    )
    workloads = draw_workloads(draw, workloads_of, draw(st.integers(1, 12)), latest=60, timed=True)
    return workloads_of, second, workloads, draw(st.sampled_from([None, 90.0]))


def simulator(policy: Policy, workloads: list[Workload], horizon: float | None) -> Simulator:
    return Simulator(
        policy,
        [(w, "class") for w in copy.deepcopy(workloads)],
        eviction_delay=3.0,
        start=0.0,
        # Some policies make workloads preempt each other for ever: the clock stops.
        horizon=horizon if horizon is not None else 3_600.0,
    )


def outcome(result: SimulationResult) -> Any:
    records = {
        key: (r.first_admitted, r.finished, r.preemptions, r.lost_seconds, r.timed_out)
        for key, r in result.records.items()
    }
    totals = {
        name: (dict(t.used), dict(t.borrowed), dict(t.lent)) for name, t in result.totals.items()
    }
    return records, totals, result.admission_log, result.cycles, result.series, result.end


class Clock:
    """A wall clock that moves a second at every look: every slice is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_reading_replays_as_they_go_changes_nothing_and_reads_what_a_stop_there_gives(
    case: tuple[Policy, Policy, list[Workload], float | None],
) -> None:
    first, second, workloads, horizon = case
    alone = {
        "a": simulator(first, workloads, horizon).run(),
        "b": simulator(second, workloads, horizon).run(),
    }
    together = {
        "a": simulator(first, workloads, horizon),
        "b": simulator(second, workloads, horizon),
    }
    read: list[float] = []
    shares: list[float] = []

    def so_far(at: float) -> None:
        read.append(at)
        for label, running in together.items():
            snapshot = running.snapshot(at)
            summarize(snapshot)  # what the what-if page is given
            # A replay stopped at ``at`` holds the same records and usage.
            stopped = simulator(first if label == "a" else second, workloads, at).run()
            if running.done:
                continue  # past its end: it answers as of then
            assert snapshot.end == stopped.end == at
            # The figures so far count the workloads that had arrived.
            assert set(snapshot.records) == {
                key for key, r in stopped.records.items() if max(r.created, 0.0) < at
            }
            for key, record in snapshot.records.items():
                assert record.first_admitted == stopped.records[key].first_admitted, key
            for name, totals in snapshot.totals.items():
                other = stopped.totals[name]
                for mine, theirs in (
                    (totals.used, other.used),
                    (totals.borrowed, other.borrowed),
                    (totals.lent, other.lent),
                ):
                    for fr in set(mine) | set(theirs):
                        assert close(mine.get(fr, 0.0), theirs.get(fr, 0.0)), (name, fr)

    results = replay_together(
        together, progress=shares.append, so_far=so_far, every=0.0, clock=Clock()
    )
    assert outcome(results["a"]) == outcome(alone["a"])
    assert outcome(results["b"]) == outcome(alone["b"])
    assert read == sorted(read)
    assert shares == sorted(shares) and (not shares or shares[-1] <= 1.0)
