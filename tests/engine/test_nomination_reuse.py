"""A cycle reuses a head's last nomination while nothing in its cohort tree has
changed (``Scheduler._nomination``). Replays of any policy and any stream must
come out the same with the reuse as without it: same admissions at the same
times, same victims, same waits (hypothesis, no database)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queues.engine.model import Policy, Workload
from queues.engine.simulator import Simulator
from tests.engine.test_properties import draw_workloads, policies


@st.composite
def streams(draw: Any) -> tuple[Policy, list[Workload], float]:
    policy = draw(policies())
    workloads = draw_workloads(draw, policy, draw(st.integers(2, 14)), latest=40, timed=True)
    # With an eviction delay victims hold their quota while marked evicting.
    return policy, workloads, float(draw(st.sampled_from([0, 3])))


def replay(policy: Policy, workloads: list[Workload], eviction: float, reuse: bool) -> Any:
    simulator = Simulator(
        policy,
        [(w, "class") for w in copy.deepcopy(workloads)],
        eviction_delay=eviction,
        requeue_delay=1.0,
        # Some policies make workloads preempt each other for ever (the
        # simulator backs off but time goes on): the clock stops here.
        horizon=3_600.0,
    )
    simulator.scheduler.reuse_nominations = reuse
    result = simulator.run()
    records = {
        key: (r.first_admitted, r.finished, r.preemptions, r.preemptions_by_reason, r.lost_seconds)
        for key, r in result.records.items()
    }
    return records, result.admission_log, result.preemptions_by_reason, result.cycles


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_reusing_nominations_changes_no_replay(case: tuple[Policy, list[Workload], float]) -> None:
    policy, workloads, eviction = case
    assert replay(policy, workloads, eviction, reuse=True) == replay(
        policy, workloads, eviction, reuse=False
    )
