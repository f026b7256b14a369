"""The classic victim search gives up early when the preemptor would exceed
its own queue's borrowing limit even with every candidate of its queue gone
(``Preemptor._beyond_borrowing_limit``; ``Scheduler.stop_at_borrowing_limit``
turns it off): no victim elsewhere can help it then.
Replays of any policy and stream come out exactly the same with the shortcut
as without it: admissions, victims, waits, cycles and usage figures
(hypothesis, no database)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from queues.engine.model import Policy, Workload
from queues.engine.result_codec import to_json
from tests.engine.test_nomination_reuse import simulator_for, streams


def replay(
    policy: Policy, workloads: list[Workload], eviction: float, *, shortcut: bool = True
) -> dict[str, Any]:
    simulator = simulator_for(policy, workloads, eviction)
    simulator.scheduler.stop_at_borrowing_limit = shortcut
    return to_json(simulator.run())


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams())
def test_giving_up_at_the_borrowing_limit_changes_no_replay(
    case: tuple[Policy, list[Workload], float],
) -> None:
    policy, workloads, eviction = case
    shortcut = replay(policy, workloads, eviction)
    searched = replay(policy, workloads, eviction, shortcut=False)
    assert shortcut == searched
