"""A StrictFIFO head that only stays pending is left where it is
(``PendingQueue.resting``, ``Scheduler._standing``): a cycle tells it again
without popping, ordering or requeueing it. It must say what popping it
would have said, and let go of the head the moment it may go ahead. Replays
of any policy come out the same with it as without
(``test_nomination_reuse.test_reusing_nominations_changes_no_replay``: the
reuse switch turns both off)."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from queues.engine.model import PodSet, Policy, QueueingStrategy, Workload
from queues.engine.queueing import PendingQueue
from queues.engine.scenario import parse
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator
from tests.engine.test_nomination_reuse import GPU, cohort_job, cohort_queue


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


# A tree's standing heads are told with its block (StandingBlock) while its
# version holds, or while the root's usage stays where whether a head's
# requests fit does not change (below, the gang never fits while "mine"
# holds its queue's quota), with the room they find at that usage.


def _block_scenario() -> Any:
    # Cohort "c": "q" has 2 GPUs and may borrow 2 more, "other" has 8. With
    # "mine" (2) in q and "o1" (5) in other, the gang (3) sees 2 free: what
    # q may still borrow, as long as the cohort uses at most 8 GPUs.
    return parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("q", 2, borrowing_limit=2), cohort_queue("other", 8)],
            "workloads": [
                cohort_job("mine", "q", 2, 0),
                cohort_job("o1", "other", 5, 0),
                cohort_job("gang", "q", 3, 1),
                cohort_job("o2", "other", 1, 2),
                cohort_job("o3", "other", 1, 3),
            ],
        }
    )


def _replay_with_block(scheduler: Scheduler, then: str) -> list[tuple[list[str], str, int]]:
    """Cycles as "o2" comes and is admitted (the cohort then uses 8 GPUs),
    then as ``then`` happens: "o3" comes (9 GPUs), or "mine" ends (6 GPUs,
    2 of them freed in the gang's own queue). What each cycle admitted and
    told the gang, and the heads told with their block so far."""
    by_name = {w.name: copy.deepcopy(w) for w in _block_scenario().workloads}
    said = []
    events: dict[float, Any] = {
        0: lambda: [scheduler.add(by_name[n]) for n in ("mine", "o1")],
        1: lambda: scheduler.add(by_name["gang"]),
        2: lambda: scheduler.add(by_name["o2"]),
        3: (
            (lambda: scheduler.add(by_name["o3"]))
            if then == "o3"
            else (lambda: scheduler.finish("default/mine"))
        ),
    }
    for now in (0, 1, 1.5, 2, 2.5, 3, 3.5, 4):
        if now in events:
            events[now]()
        result = scheduler.cycle(now=float(now))
        told = result.evaluated.get("default/gang")
        message = "" if told is None else told.message
        said.append((sorted(result.admitted), message, scheduler.told_with_block))
    return said


def _told_alike(then: str) -> list[tuple[list[str], str, int]]:
    standing, popping = Scheduler(_block_scenario().policy), Scheduler(_block_scenario().policy)
    popping.reuse_nominations = False
    said = _replay_with_block(standing, then)
    assert [s[:2] for s in said] == [s[:2] for s in _replay_with_block(popping, then)]
    assert popping.told_with_block == 0
    return said


def test_a_standing_head_is_told_with_its_block_and_the_room_it_finds_now() -> None:
    said = _told_alike("o3")
    assert [admitted for admitted, _, _ in said] == [
        ["default/mine", "default/o1"],
        [],
        [],  # quiet: answered from the tree's memory
        ["default/o2"],
        [],
        ["default/o3"],
        [],
        [],
    ]
    # At 2.5 the tree's version has moved ("o2" took a GPU), but the cohort
    # still uses 8: told with its block; at 3 too (nothing moved since); at
    # 3.5 the cohort uses 9 and the gang sees only 1 free: still told with
    # its block (it cannot fit at any usage while its queue holds what it
    # does), with that figure, as asked (_told_alike); at 4 the tree is quiet.
    assert [told_with for _, _, told_with in said] == [0, 0, 0, 0, 1, 2, 3, 3]
    assert [message.rsplit(", ", 1)[-1] for _, message, _ in said[1:]] == [
        *["1 more needed"] * 5,
        *["2 more needed"] * 2,
    ]


def test_a_standing_head_is_asked_again_once_its_own_queue_gives_back_quota() -> None:
    # "mine" ends: the cohort uses 6 GPUs, within the gang's range, but its
    # own queue now has 2 free of its own: the gang is asked again, and fits.
    said = _told_alike("mine")
    assert [admitted for admitted, _, _ in said][5:] == [["default/gang"], [], []]
    assert said[4][2] == 1  # told with its block at 2.5, as above
    assert said[5][2] == 1


def test_a_quiet_tree_told_with_its_block_remembers_the_blocks_answers_uncopied() -> None:
    # At 3.5 every head of the tree is told with its block, and nothing
    # changes until 4: the tree's memory (_quiet_trees) is the block's own
    # answers, not a copy of them made every cycle; word for word what
    # asking says (_told_alike).
    scheduler = Scheduler(_block_scenario().policy)
    _replay_with_block(scheduler, "o3")
    root = scheduler._root_of["q"]
    assert scheduler._quiet[root].evaluated is scheduler._blocks[root].told
    # Its own queue gives back quota: the memory is let go before the
    # block is read again, and "gang" fits.
    scheduler.finish("default/mine")
    assert scheduler.cycle(now=5.0).admitted.keys() == {"default/gang"}
    assert root not in scheduler._quiet or "default/gang" not in scheduler._quiet[root].evaluated


def _jobs(
    rng: random.Random, queues: list[str], count: int, gpus: Callable[[], int], latest: int
) -> list[Workload]:
    """``count`` one-pod jobs in ``queues``, of ``gpus()`` GPUs each, made
    by ``latest`` and running up to 30 s."""
    return [
        Workload(
            name=f"w{i}",
            cluster_queue=rng.choice(queues),
            pod_sets=(PodSet("main", 1, {GPU: gpus()}),),
            creation_time=float(rng.randint(0, latest)),
            runtime=float(rng.randint(1, 30)),
        )
        for i in range(count)
    ]


def _busy_cohort(rng: random.Random) -> tuple[Policy, list[Workload]]:
    """A cohort of StrictFIFO queues that borrow up to a limit, and a stream
    of jobs larger than most of them: gangs wait, standing, while quota
    moves around them, where their blocks' ranges are put to the test. In
    a queue of its own tree, now and then a workload already running when
    the replay sees it (admitted, no admission time): while it holds quota
    no answer is reused, in any tree."""
    queues = [cohort_queue("solo", 4, cohort="elsewhere")]
    for i in range(rng.randint(2, 4)):
        nominal, reclaims_any = rng.randint(1, 4), rng.random() < 0.3
        limit = rng.choice([0, 1, 2, 3, None])
        queue = cohort_queue(f"q{i}", nominal, cohort="org", borrowing_limit=limit)
        if reclaims_any:
            queue["preemption"] = {"reclaimWithinCohort": "Any"}
        queues.append(queue)
    policy = parse({"resourceFlavors": [{"name": "h100"}], "clusterQueues": queues}).policy
    workloads = _jobs(
        rng,
        sorted(set(policy.cluster_queues) - {"solo"}),
        rng.randint(8, 30),
        lambda: rng.randint(1, 6),
        latest=60,
    )
    for i in range(rng.choice([0, 0, 1, 3])):
        workloads.append(
            Workload(
                name=f"running{i}",
                cluster_queue="solo",
                pod_sets=(PodSet("main", 1, {GPU: 1}),),
                creation_time=float(rng.randint(0, 60)),
                runtime=float(rng.randint(1, 10)),
                admission={"main": {GPU: "h100"}},
            )
        )
    return policy, workloads


def _replayed(
    policy: Policy, workloads: list[Workload], reuse: bool = True, blocks: bool = True
) -> tuple[Any, Scheduler]:
    simulator = Simulator(policy, [(w, "class") for w in copy.deepcopy(workloads)])
    simulator.scheduler.reuse_nominations = reuse
    simulator.scheduler.standing_blocks = blocks
    # Every cycle run, to be compared one by one: none counted unasked
    # (tests/engine/test_unparking.py holds those to these).
    simulator.park_in_place = False
    said: list[list[tuple[str, str, str]]] = []
    simulator.after_cycle = lambda cycle: said.append(
        sorted((key, p.reason, p.message) for key, p in cycle.evaluated.items())
    )
    result = simulator.run()
    admitted = {key: (r.first_admitted, r.finished) for key, r in result.records.items()}
    return (admitted, result.admission_log, result.cycles, said), simulator.scheduler


def _asked(scheduler: Scheduler) -> tuple[object, ...]:
    """What answering cost, as the bench counts it. Answers given again are
    counted together, reused or with their figures read again: a head told
    with its block once quota moved does not write what it was told into
    its nomination (not writing it is the saving), so asked later it may
    count as read again where asking every time would have found its
    figures unmoved. For the same reason its hopeless searches may be
    asked again where asking every time had just asked them, so those
    counts are compared apart (``_searched_no_less``)."""
    return (
        scheduler.nominated,
        scheduler.reused + scheduler.refreshed,
        scheduler.left_standing,
        scheduler.hopeless,
    )


def _searched_no_less(told: Scheduler, asking: Scheduler) -> bool:
    """Every hopeless search asking asked again, told with its block or
    asked again there too, each known to hold from usage alone as often."""
    return (
        told.hopeless_asked_again >= asking.hopeless_asked_again
        and told.hopeless_as_used >= asking.hopeless_as_used
        and told.hopeless_asked_again - told.hopeless_as_used
        == asking.hopeless_asked_again - asking.hopeless_as_used
    )


def test_heads_told_with_their_blocks_replay_and_cost_as_heads_asked() -> None:
    # Seeded, not drawn: the last assertions need the whole run's counts.
    # Each replay with blocks is held to one with every head asked afresh
    # (what is said and admitted), and to one with no blocks, where a head
    # told with its block counts as the reused answer asking it would have
    # given: every count is as with no blocks.
    over_ranges = told_with_block = 0
    for seed in range(120):
        scheduler = _held_to_asking(*_busy_cohort(random.Random(seed)), seed)
        over_ranges += scheduler.told_over_ranges
        told_with_block += scheduler.told_with_block
    assert over_ranges > 100  # the ranges were put to the test
    assert told_with_block > 1000


def _held_to_asking(policy: Policy, workloads: list[Workload], seed: int) -> Scheduler:
    """The replay with blocks, held to one with every head asked afresh and
    to one with no blocks (see above); its scheduler."""
    fresh, _ = _replayed(policy, workloads, reuse=False)
    without, asking = _replayed(policy, workloads, blocks=False)
    told, scheduler = _replayed(policy, workloads)
    assert told == fresh, seed
    assert (told, _asked(scheduler)) == (without, _asked(asking)), seed
    assert _searched_no_less(scheduler, asking), seed
    assert asking.told_with_block == 0
    return scheduler


def _reclaiming_cohort(rng: random.Random) -> tuple[Policy, list[Workload]]:
    """A cohort of StrictFIFO queues that may reclaim from any other, with
    gangs within their queue's nominal quota: a gang that finds its quota
    lent out searches for victims, and while the others use no more than
    their own, it finds none at once (hopeless) and stands, its search held
    to the usage it saw as others come and go around it."""
    queues = []
    for i in range(rng.randint(2, 4)):
        queue = cohort_queue(
            f"q{i}", rng.randint(3, 6), cohort="org", borrowing_limit=rng.choice([0, 2, None])
        )
        queue["preemption"] = {"reclaimWithinCohort": "Any"}
        queues.append(queue)
    policy = parse({"resourceFlavors": [{"name": "h100"}], "clusterQueues": queues}).policy
    gpus = [1, 1, 2, 3, 4]
    count = rng.randint(30, 80)
    workloads = _jobs(rng, sorted(policy.cluster_queues), count, lambda: rng.choice(gpus), 150)
    return policy, workloads


def test_heads_with_hopeless_searches_told_with_their_blocks_replay_as_asked() -> None:
    # As above, for heads whose victim searches were hopeless: told with
    # their block only while their root uses no less than each search saw.
    searches_over_ranges = 0
    for seed in range(80):
        scheduler = _held_to_asking(*_reclaiming_cohort(random.Random(seed)), seed)
        searches_over_ranges += scheduler.searches_told_over_ranges
    assert searches_over_ranges > 100  # the searches' floors were put to the test


def _statuses(policy: Policy, workloads: list[Workload], blocks: bool) -> list[dict[str, str]]:
    """What the scheduler's status says of every workload after each cycle."""
    simulator = Simulator(policy, [(w, "class") for w in copy.deepcopy(workloads)])
    simulator.scheduler.standing_blocks = blocks
    simulator.park_in_place = False
    status = simulator.scheduler.status
    seen: list[dict[str, str]] = []
    simulator.after_cycle = lambda cycle: seen.append(
        {key: f"{p.reason}: {p.message}" for key, p in status.items()}
    )
    simulator.run()
    return seen


def test_a_block_told_again_unchanged_leaves_the_status_as_writing_it_would() -> None:
    # A block told again with nothing in it changed does not write its
    # heads' status again (StandingBlock.in_status): after every cycle the
    # status must read as with no blocks, where each head is written as asked.
    for seed in range(60):
        for cohort in (_busy_cohort, _reclaiming_cohort):
            policy, workloads = cohort(random.Random(seed))
            with_blocks = _statuses(policy, workloads, blocks=True)
            assert with_blocks == _statuses(policy, workloads, blocks=False), (seed, cohort)


def _asked_with_and_without_blocks(scenario: Any, steps: list[str | float]) -> list[Any]:
    """What nominating cost (fresh per queue, reused, left standing) with
    blocks and without, after ``steps``: a workload's name adds it, a time
    runs a cycle then, and "outgrow" seeds the nomination table with
    entries of workloads gone other than by finish, so that the next fresh
    nomination clears it (it is cleared when it outgrows the workloads)."""
    counts = []
    for blocks in (True, False):
        scheduler = Scheduler(scenario.policy)
        scheduler.standing_blocks = blocks
        by_name = {w.name: copy.deepcopy(w) for w in scenario.workloads}
        for step in steps:
            if isinstance(step, float):
                scheduler.cycle(now=step)
            elif step == "outgrow":
                for i in range(4 * len(scenario.workloads) + 1025):
                    scheduler._nominations[f"gone/{i}"] = scheduler._nominations["default/gang"]
            else:
                scheduler.add(by_name[step])
        counts.append((scheduler.nominated, scheduler.reused, scheduler.left_standing))
    return counts


def test_a_head_whose_nomination_was_let_go_is_asked_not_told_with_its_block() -> None:
    # A cycle that clears the table while a block holds the gang must leave
    # the block behind: asked, the gang is nominated afresh, as with no
    # blocks. Each of p1..p3 is nominated afresh, the first clearing it.
    parking = cohort_queue("a9", 0, cohort="ta")
    parking["queueingStrategy"] = "BestEffortFIFO"
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [cohort_queue("a0", 2, cohort="ta"), parking],
            "workloads": [cohort_job("gang", "a0", 3, 0)]
            + [cohort_job(f"p{i}", "a9", 5, i) for i in range(1, 4)],
        }
    )
    steps: list[str | float] = ["gang", 0.0, "outgrow", "p1", 1.0, "p2", 2.0, "p3", 3.0]
    counts = _asked_with_and_without_blocks(scenario, steps)
    assert counts[0] == counts[1]
    assert counts[0][0]["a0"] == 2  # asked afresh once the table let its answer go


def test_a_head_whose_block_still_holds_is_asked_once_the_table_let_its_nomination_go() -> None:
    # As above, with the gang's tree unchanged but for heads queued beside
    # it, p2 in a queue that sorts first, whose fresh nomination clears the
    # table in the very cycle: the block's version holds, and still the
    # gang is asked, as with no blocks (the block keeps the nomination the
    # gang was told with, which the clear let go).
    scenario = parse(
        {
            "resourceFlavors": [{"name": "h100"}],
            "clusterQueues": [
                cohort_queue("a0", 0, cohort="ta"),
                cohort_queue("a1", 2, cohort="ta"),
                cohort_queue("a2", 0, cohort="ta"),
            ],
            "workloads": [
                cohort_job("gang", "a1", 3, 0),
                cohort_job("p1", "a2", 5, 1),
                cohort_job("p2", "a0", 5, 2),
            ],
        }
    )
    # p1 fits nowhere, and the gang is left standing, in its block, at 1.0.
    steps: list[str | float] = ["gang", 0.0, "p1", 1.0, "outgrow", "p2", 2.0]
    counts = _asked_with_and_without_blocks(scenario, steps)
    assert counts[0] == counts[1]
    assert counts[0][0]["a1"] == 2  # asked afresh once the table let its answer go
