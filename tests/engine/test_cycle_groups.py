"""A cycle in some independent groups (``Scheduler.cycle(groups=...)``)
admits, preempts and tells heads only there, whether it asks them or reports
a quiet tree's last answers (``NominationMemory._quiet_trees``). The
simulator counts on it: a cycle in one group is that group's outcome as a
whole (``Settler._by_group``), with nothing looked up per workload."""

from __future__ import annotations

from typing import Any

from queues.engine.outcomes import CycleResult
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from tests.engine.test_nomination_reuse import cohort_job, cohort_queue


def _two_trees() -> tuple[Scheduler, dict[str, Any]]:
    """Cohorts "a" and "b", each of 10 GPUs: a gang of 16 that never fits
    in its StrictFIFO queue and a job filling the other queue; two late jobs
    of one GPU each, one per cohort, not yet added."""
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [
                cohort_queue("gangs-a", 2, cohort="a"),
                cohort_queue("jobs-a", 8, cohort="a"),
                cohort_queue("gangs-b", 2, cohort="b"),
                cohort_queue("jobs-b", 8, cohort="b"),
            ],
            "workloads": [
                cohort_job("gang-a", "gangs-a", 16, 0),
                cohort_job("gang-b", "gangs-b", 16, 0),
                cohort_job("fill-a", "jobs-a", 8, 1),
                cohort_job("fill-b", "jobs-b", 8, 1),
                cohort_job("late-a", "jobs-a", 1, 2),
                cohort_job("late-b", "jobs-b", 1, 2),
            ],
        }
    )
    by_name = {w.name: w for w in scenario.workloads}
    scheduler = Scheduler(scenario.policy)
    for name in ("gang-a", "gang-b", "fill-a", "fill-b"):
        scheduler.add(by_name[name])
    return scheduler, by_name


def _told(result: CycleResult) -> dict[str, set[str]]:
    return {
        "admitted": set(result.admitted),
        "evaluated": set(result.evaluated),
        "preempted": {p.victim for p in result.preempted},
    }


def test_a_cycle_in_one_group_answers_only_there() -> None:
    scheduler, by_name = _two_trees()
    group_a, group_b = scheduler.group_of["gangs-a"], scheduler.group_of["gangs-b"]
    assert group_a != group_b
    assert set(scheduler.cycle(now=1).admitted) == {"default/fill-a", "default/fill-b"}
    scheduler.cycle(now=1)  # both trees quiet from here: nothing changes in them
    scheduler.add(by_name["late-a"])
    scheduler.add(by_name["late-b"])

    assert _told(scheduler.cycle(now=2, groups={group_a})) == {
        "admitted": {"default/late-a"},
        "evaluated": {"default/gang-a"},
        "preempted": set(),
    }
    # Nothing changed in tree "a" since: its answer comes from its memory.
    assert _told(scheduler.cycle(now=2, groups={group_a})) == {
        "admitted": set(),
        "evaluated": {"default/gang-a"},
        "preempted": set(),
    }
    assert "default/late-b" not in scheduler.reserved["jobs-b"]
    # Tree "a" is still quiet: a cycle in "b" does not report it.
    assert _told(scheduler.cycle(now=3, groups={group_b})) == {
        "admitted": {"default/late-b"},
        "evaluated": {"default/gang-b"},
        "preempted": set(),
    }
