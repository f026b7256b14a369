"""A StrictFIFO head that only stays pending is left where it is
(``PendingQueue.resting``, ``Scheduler._standing``): a cycle tells it again
without popping, ordering or requeueing it. It must say what popping it
would have said, and let go of the head the moment it may go ahead. Replays
of any policy come out the same with it as without
(``test_nomination_reuse.test_reusing_nominations_changes_no_replay``: the
reuse switch turns both off)."""

from __future__ import annotations

import copy
from typing import Any

from queues.engine.model import QueueingStrategy, Workload
from queues.engine.queueing import PendingQueue
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from tests.engine.test_nomination_reuse import cohort_job, cohort_queue


def _workload(name: str, created: float) -> Workload:
    return Workload(name=name, cluster_queue="q", creation_time=created, pod_sets=())


def test_a_strict_head_rests_until_anything_else_happens_in_its_queue() -> None:
    queue = PendingQueue("q", QueueingStrategy.STRICT_FIFO)
    first, second = _workload("a", 1), _workload("b", 2)
    queue.push(first)
    queue.push(second)
    assert queue.resting is None  # never evaluated yet
    assert queue.pop() is first
    assert queue.resting is None  # out for the cycle
    queue.requeue(first, "NoFit")
    assert queue.resting is first
    assert queue.pop() is first  # what resting promised
    queue.requeue(first, "NoFit")
    for change in (
        lambda: queue.push(_workload("c", 0)),
        lambda: queue.remove("default/b"),
        queue.unpark,
        queue.pop,
    ):
        queue.requeue(queue.pop() or first, "NoFit")
        assert queue.resting is not None
        change()
        assert queue.resting is None, change


def test_a_best_effort_head_never_rests() -> None:
    queue = PendingQueue("q", QueueingStrategy.BEST_EFFORT_FIFO)
    head = _workload("a", 1)
    queue.push(head)
    assert queue.pop() is head
    queue.requeue(head, "FailedAfterNomination")  # back at once, but not left standing
    assert queue.resting is None


def _scenario(gang_gpus: int) -> Any:
    return parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 2), cohort_queue("other", 8)],
            "workloads": [
                cohort_job("first", "other", 8, 0),
                cohort_job("gang", "q", gang_gpus, 1),
                cohort_job("small", "q", 2, 2),
                cohort_job("next", "other", 1, 3),
            ],
        }
    )


def _replay(scheduler: Scheduler, scenario: Any) -> list[tuple[list[str], dict[str, str]]]:
    """Four cycles ("next" comes at the third), then "first" and "next" end, and two more."""
    by_name = {w.name: copy.deepcopy(w) for w in scenario.workloads}
    said = []
    scheduler.add(by_name["first"])
    scheduler.add(by_name["gang"])
    scheduler.add(by_name["small"])
    for now in range(6):
        if now == 2:
            scheduler.add(by_name["next"])
        if now == 4:
            scheduler.finish("default/first")
            scheduler.finish("default/next")
        result = scheduler.cycle(now=float(now))
        said.append(
            (
                sorted(result.admitted),
                {key: f"{p.reason}: {p.message}" for key, p in result.evaluated.items()},
            )
        )
    return said


def _said_alike(gang_gpus: int) -> tuple[Scheduler, list[tuple[list[str], dict[str, str]]]]:
    """The scheduler that leaves heads standing, and what it said: the same,
    word for word, as a scheduler that pops every head says."""
    scenario = _scenario(gang_gpus)
    standing, popping = Scheduler(scenario.policy), Scheduler(scenario.policy)
    popping.reuse_nominations = False
    said = _replay(standing, scenario)
    assert said == _replay(popping, scenario)
    assert popping.left_standing == 0
    return standing, said


def test_a_gang_that_cannot_fit_is_told_again_where_it_stands() -> None:
    # "gang" asks 16 GPUs of a cohort of 10: it never fits, blocks "small"
    # behind it (StrictFIFO), and is told so in every cycle, left in its queue
    # from the second on, as "next" comes and is admitted beside it. A
    # scheduler that pops every head says the same, word for word.
    standing, said = _said_alike(16)
    assert [admitted for admitted, _ in said] == [
        ["default/first"],
        [],
        ["default/next"],
        [],
        [],
        [],
    ]
    assert all(list(evaluated) == ["default/gang"] for _, evaluated in said)
    # Every cycle after the first but the last: nothing changed in the fifth,
    # so the sixth answers from the quiet tree's memory (_quiet_trees).
    assert standing.left_standing == 4
    assert standing.queues["q"].resting is standing.workloads["default/gang"]


def test_a_standing_head_that_may_now_go_ahead_is_popped_and_admitted() -> None:
    # "gang" asks 10 GPUs: it waits while "first" holds 8, then fits.
    standing, said = _said_alike(10)
    assert [admitted for admitted, _ in said][3:] == [[], ["default/gang"], []]
    assert standing.left_standing == 3  # the second to fourth cycles; the fifth popped it
    # "small", its queue's head now, cannot fit beside it and rests in turn.
    assert standing.queues["q"].resting is standing.workloads["default/small"]
