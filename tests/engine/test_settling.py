"""A group whose workloads preempt each other round and round
(``queues.engine.settling``): it counts a livelock, backs off and is tried
again later, so the clock moves on; and while it backs off, nothing it did
itself (parked workloads asking to queue again) cycles it again at the same
instant, which with ``requeue_delay`` 0 once spun a replay there for ever.

The churn comes from flavor assignment, as in Kueue: a gang of two pod sets
(6 and 9 GPUs) takes flavor "a" for the first set whenever it fits there.
With "small" (5 GPUs) borrowing on "a", the first set goes to "b" and the
second preempts "small" on "a"; with "small" gone, the first set fits on "a",
leaving no flavor for the second, and "small" is admitted again."""

from __future__ import annotations

import contextlib
import math
import signal
from collections import Counter
from collections.abc import Iterator

from queues.engine.estimate import HORIZON, Pace, estimate_all, estimate_start
from queues.engine.model import (
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    PodSet,
    Policy,
    Preemption,
    QueueingStrategy,
    Quota,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    Workload,
)
from queues.engine.runner import run_cycles
from queues.engine.scheduler import CycleResult, Scheduler
from queues.engine.settling import CycleSink, Settler
from queues.engine.simulator import SimulationResult, Simulator

GPU = "nvidia.com/gpu"


def _queue(name: str, quotas: dict[str, Quota], **options: object) -> ClusterQueue:
    flavors = tuple(FlavorQuotas(flavor, {GPU: quota}) for flavor, quota in quotas.items())
    return ClusterQueue(
        name=name,
        cohort="c",
        resource_groups=(ResourceGroup((GPU,), flavors),),
        **options,  # type: ignore[arg-type]
    )


def _policy() -> Policy:
    """Cohort "c": flavor "a" has 2 GPUs of "gangs" and 8 of "lender", flavor
    "b" 7 of "small", of which "gangs" may borrow all."""
    return Policy(
        flavors={name: ResourceFlavor(name) for name in ("a", "b")},
        cohorts={"c": Cohort("c")},
        cluster_queues={
            "gangs": _queue(
                "gangs",
                {"a": Quota(2), "b": Quota(0, borrowing_limit=7)},
                queueing_strategy=QueueingStrategy.STRICT_FIFO,
                preemption=Preemption(
                    reclaim_within_cohort=ReclaimWithinCohort.LOWER_PRIORITY,
                    borrow_within_cohort=BorrowWithinCohort.LOWER_PRIORITY,
                ),
            ),
            "small": _queue("small", {"a": Quota(0), "b": Quota(7)}),
            "lender": _queue("lender", {"a": Quota(8)}),
        },
    )


class _Unheeded(CycleSink):
    """A settler's cycles told to no one: the scheduler's state is what the
    test reads."""

    def cycled(self, result: CycleResult, now: float) -> None:
        pass

    def retry(self, at: float, group: str) -> None:
        pass


def _job(
    name: str, queue: str, at: float, runtime: float, *gpus: int, priority: int = 0
) -> Workload:
    return Workload(
        name=name,
        cluster_queue=queue,
        pod_sets=tuple(PodSet(f"ps{i}", 1, {GPU: n}) for i, n in enumerate(gpus)),
        priority=priority,
        creation_time=at,
        runtime=runtime,
    )


def _churning() -> list[Workload]:
    return [
        _job("small", "small", 0, 15, 5),
        _job("gang", "gangs", 1, 50, 6, 9, priority=2),
    ]


def _replay(
    workloads: list[Workload], *, timed: bool = False
) -> tuple[Simulator, SimulationResult]:
    """Replayed with parked workloads queued again at once (requeue_delay 0,
    Berth's simulated cluster) and victims gone at once; a replay that goes
    on and on fails, not hangs."""
    simulator = Simulator(
        _policy(), [(w, "batch") for w in workloads], requeue_delay=0.0, eviction_delay=0.0
    )
    simulator.settler.timed = timed
    events = Counter[str]()

    def count(now: float, kind: str, _: object) -> None:
        events[kind] += 1
        if events.total() > 5_000:
            raise AssertionError(f"still going at {now}: {dict(events)}")

    simulator.before_event = count
    return simulator, simulator.run()


def test_a_group_that_churns_counts_a_livelock_and_is_tried_again_later() -> None:
    simulator, result = _replay(_churning())
    # Tried again 1, 2, 4... seconds later, the clock moving on: once "small"
    # outlasts the back-off, it finishes, and the gang churns no more.
    assert result.livelocks >= 2
    assert result.records["default/small"].finished is not None
    # Each of its admissions set a completion, cancelled as it was preempted:
    # those happen in no group and did not start the churn again.
    assert result.records["default/gang"].first_admitted is None
    assert simulator.now < 100


def test_parked_workloads_do_not_cycle_a_group_again_while_it_backs_off() -> None:
    # "small" comes after the gang: each churn ends with it preempted, which
    # asks "never" (more than the cohort has, parked in the BestEffortFIFO
    # "lender") to queue again. At once, it would cycle the group again at
    # the same instant, for ever.
    workloads = [
        _job("never", "lender", 0, 10, 11),
        _job("gang", "gangs", 1, 50, 6, 9, priority=2),
        _job("small", "small", 2, 15, 5),
    ]
    simulator, result = _replay(workloads)
    # Tried again 1, 2, ... 512 s later (1,023 s in all); at the ceiling it is
    # left as it is, and the replay ends with the completions it cancelled.
    assert result.livelocks == 11
    assert simulator.now == 2 + 1_023 + 15
    assert result.records["default/small"].finished is None


def test_a_group_left_churning_is_tried_again_when_something_happens_there() -> None:
    # "filler" (of higher priority than the gang) takes 5 GPUs of "a" for good:
    # with "small" borrowing the rest, the gang's second pod set finds no
    # flavor even with "small" preempted, and the churn ends.
    workloads = [
        _job("never", "lender", 0, 10, 11),
        _job("gang", "gangs", 1, 50, 6, 9, priority=2),
        _job("small", "small", 2, 15, 5),
        _job("filler", "lender", 5_000, math.inf, 5, priority=3),
    ]
    simulator = Simulator(
        _policy(), [(w, "batch") for w in workloads], requeue_delay=0.0, eviction_delay=0.0
    )
    simulator.begin()
    simulator.advance(until=4_000)
    assert simulator.given_up == {"c"} and simulator.settler.livelocks == 11
    simulator.advance()
    assert simulator.given_up == set() and simulator.settler.livelocks == 11
    records = simulator.result().records
    assert records["default/filler"].first_admitted == 5_000
    assert records["default/small"].finished == 5_015


def test_work_parked_in_a_group_left_churning_queues_again_once_capacity_frees() -> None:
    # "j0" (9 GPUs of "a", lender) arrives while "small" borrows "a" and is
    # parked (BestEffortFIFO). The gang and "small" churn until the group is
    # left (given up); "small" runs on, across its preemptions, until it
    # finishes. That finish happens in the group: the group's retry time is
    # cleared, so "j0" queues again requeue_delay later. Kept until a retry
    # that never comes (the back-off at its ceiling), it would wait for ever
    # beside a free flavor.
    workloads = [
        _job("small", "small", 0, 2_000, 5),
        _job("gang", "gangs", 1, 50, 6, 9, priority=2),
        _job("j0", "lender", 39, 30, 9, priority=1),
    ]
    simulator = Simulator(
        _policy(), [(w, "batch") for w in workloads], requeue_delay=1.0, eviction_delay=0.0
    )
    simulator.begin()
    simulator.advance(until=2_000)
    assert simulator.given_up == {"c"}
    assert simulator.result().records["default/j0"].first_admitted is None
    simulator.advance()
    records = simulator.result().records
    finished = records["default/small"].finished
    assert finished is not None and finished > 2_000
    assert records["default/j0"].first_admitted == finished + 1.0


@contextlib.contextmanager
def _failing_after(seconds: int) -> Iterator[None]:
    """Fails, not hangs, a forward run that would go on for ever (not a
    time limit on a run that ends: it takes about a second)."""

    def stop(*_: object) -> None:
        raise AssertionError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _pending_gang_and_small() -> Scheduler:
    """The cluster as sync might see it: "small" pending behind the gang in
    the churning tree, neither admitted."""
    scheduler = Scheduler(_policy(), now=0.0)
    scheduler.add(_job("gang", "gangs", 0, 50, 6, 9, priority=2))
    scheduler.add(_job("small", "small", 1, 15, 5))
    scheduler.now = 2.0
    return scheduler


def test_start_estimates_end_on_a_tree_that_churns_at_every_eviction() -> None:
    # Evicting taking an hour, the gang preempts "small" every hour for ever;
    # no instant livelocks. The gang does not start within the forward runs'
    # 30 days (which stop once the tree repeats itself: test_repeats.py).
    scheduler = _pending_gang_and_small()
    pace = Pace(requeue_delay=1.0, eviction_delay=3600.0)
    with _failing_after(120):
        estimate = estimate_start(scheduler, "default/gang", pace=pace)
        assert (estimate.earliest, estimate.latest) == (None, None)
        assert estimate_all(scheduler, pace=pace)["default/gang"] == estimate
    assert HORIZON == 30 * 24 * 3600


def test_a_start_beyond_the_horizon_is_not_foreseen() -> None:
    # "next" waits for "running", which has 40 days of its run left.
    scheduler = Scheduler(_policy(), now=0.0)
    running = _job("running", "lender", 0, 40 * 24 * 3600, 10)
    scheduler.add(running)
    run_cycles(scheduler, until_stable=True)
    scheduler.add(_job("next", "lender", 1, 60, 10))
    assert estimate_start(scheduler, "default/next").latest is None
    running.runtime = 20 * 24 * 3600
    assert estimate_start(scheduler, "default/next").latest == 20 * 24 * 3600 + 1


def test_each_cycle_is_counted_by_what_it_showed() -> None:
    # "second" (8 GPUs) cannot fit while "first" holds the lender's 8 and is
    # parked; "first" finishing at 10 lets it in.
    simulator, result = _replay(
        [_job("first", "lender", 0, 10, 8), _job("second", "lender", 1, 10, 8)]
    )
    settler = simulator.settler
    assert result.records["default/second"].first_admitted == 10.0
    # Each event time ends with a cycle that told nothing new (4: two
    # arrivals, two finishes); the admissions at 0 and 10 changed something;
    # second's first refusal at 1 was news.
    assert (settler.changing_cycles, settler.telling_cycles, settler.confirming_cycles) == (2, 1, 4)
    assert result.cycles == 7


def _first_and_second() -> list[Workload]:
    return [_job("first", "lender", 0, 10, 8), _job("second", "lender", 1, 10, 8)]


def test_timed_cycles_are_timed_by_what_they_showed() -> None:
    untimed, _ = _replay(_first_and_second())
    seconds = untimed.settler.changing_seconds, untimed.settler.telling_seconds
    assert (*seconds, untimed.settler.confirming_seconds) == (0.0, 0.0, 0.0)

    timed, result = _replay(_first_and_second(), timed=True)
    settler = timed.settler
    # Timing changes nothing: the same cycles as untimed (the test above),
    # and each kind that ran has some time to it.
    assert result.records["default/second"].first_admitted == 10.0
    assert (settler.changing_cycles, settler.telling_cycles, settler.confirming_cycles) == (2, 1, 4)
    assert settler.changing_seconds > 0
    assert settler.telling_seconds > 0
    assert settler.confirming_seconds > 0


def test_a_cycle_after_a_change_tells_again_what_a_cycle_before_it_told() -> None:
    # At one event time: the first cycle changes nothing but is news ("wide"
    # fits nowhere, 11 GPUs where the cohort has 10; "too-big" parks for the
    # same reason), the second admits "one". A change is news to every head
    # again, so the third, telling "wide" what the first did, is not the
    # last: the fourth is.
    scheduler = Scheduler(_policy(), now=1.0)
    for workload in (
        _job("wide", "gangs", 0, 50, 11),
        _job("too-big", "lender", 0, 50, 11),
        _job("one", "lender", 0.5, 50, 1),  # after "too-big" in its queue
    ):
        scheduler.add(workload)
    settler = Settler(scheduler, {}, requeue_delay=1.0)
    group = scheduler.group_of["lender"]
    settler.settle(1.0, {group}, _Unheeded())
    assert "default/one" in scheduler.reserved["lender"]
    assert (settler.changing_cycles, settler.telling_cycles, settler.confirming_cycles) == (1, 2, 1)
