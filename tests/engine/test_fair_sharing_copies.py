"""A replay under admission fair sharing copied or pickled in its middle
goes on as the original does: each copy's queues rank their heads by that
copy's own LocalQueue usage (``scheduler_state.LedgerRanking``), not by the
ledger of the replay it was copied from (a rehearsal's deep copy, a part
of a replay sent to a worker)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from queues.engine.scenario import parse
from queues.engine.simulator import Simulator


def _stream() -> Any:
    # One queue of 2 CPUs shared by LocalQueues "a" (busy) and "b" (quiet):
    # which one's head goes next depends on their usage, sampled every 5 min.
    workloads = [
        {
            "name": f"{team}{i}",
            "clusterQueue": "q",
            "localQueue": team,
            "creationTime": at,
            "runtime": runtime,
            "podSets": [{"requests": {"cpu": 1}}],
        }
        for team, count, runtime in (("a", 24, 700), ("b", 8, 300))
        for i, at in enumerate(range(0, count * 60, 60))
    ]
    return parse(
        {
            "admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m"},
            "resourceFlavors": [{"name": "default"}],
            "clusterQueues": [
                {
                    "name": "q",
                    "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [{"name": "cpu", "nominalQuota": 2}],
                                }
                            ],
                        }
                    ],
                }
            ],
            "workloads": workloads,
        }
    )


def _replay_from(simulator: Simulator) -> list[tuple[str, float]]:
    simulator.advance()
    result = simulator.result()
    return sorted(
        ((key, r.first_admitted) for key, r in result.records.items() if r.first_admitted),
        key=lambda pair: (pair[1], pair[0]),
    )


def test_a_copy_made_mid_replay_ranks_by_its_own_usage() -> None:
    scenario = _stream()
    simulator = Simulator(scenario.policy, [(w, "batch") for w in scenario.workloads])
    simulator.begin()
    simulator.advance(until=1_500.0)
    assert simulator.scheduler.ledger is not None and simulator.scheduler.ledger.consumed
    twins = [copy.deepcopy(simulator), pickle.loads(pickle.dumps(simulator))]
    whole = _replay_from(simulator)  # the original first: its ledger moves on
    created = {w.key: w.creation_time for w in scenario.workloads}
    order = [key for key, _ in whole]
    assert order != sorted(order, key=created.__getitem__)  # fair sharing reordered them
    for twin in twins:
        assert _replay_from(twin) == whole
