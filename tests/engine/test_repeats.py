"""A group whose state comes back shifted in time (``queues.engine.repeats``):
a run with ``stop_repeating`` (start estimates; any run without a horizon,
which would otherwise never end) leaves it there, and gives every workload
the first admission the whole run would have.

The churn is ``test_settling``'s: a gang of 6 and 9 GPUs preempts "small"
on flavor "a" for its second pod set; once "small" is gone its first set
fits on "a" and the second nowhere, and "small" is admitted again."""

from __future__ import annotations

import dataclasses
import random

from queues.engine.estimate import Pace, estimate_all, estimate_start, forward_run
from queues.engine.model import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    PodSet,
    Policy,
    QueueingStrategy,
    Quota,
    ResourceFlavor,
    ResourceGroup,
    Workload,
)
from queues.engine.repeats import (
    DICT_FIELDS,
    ORDER_FIELDS,
    SCHEDULING_FIELDS,
    TIME_FIELDS,
    UNREAD_FIELDS,
    shifted,
    watch_for,
)
from queues.engine.scheduler import Scheduler
from queues.engine.simulator import Simulator
from queues.engine.split import replay_split
from tests.engine.test_settling import GPU, _job, _pending_gang_and_small, _policy
from tests.engine.test_split import everything

DAY = 24 * 3600.0


def _run(
    policy: Policy,
    workloads: list[Workload],
    *,
    stop_repeating: bool,
    eviction_delay: float,
    requeue_delay: float,
    horizon: float,
) -> Simulator:
    simulator = Simulator(
        policy,
        [(w.copied(), "batch") for w in workloads],
        start=0.0,
        horizon=horizon,
        eviction_delay=eviction_delay,
        requeue_delay=requeue_delay,
        stop_repeating=stop_repeating,
    )
    simulator.run()
    return simulator


def _first_admissions(simulator: Simulator) -> dict[str, float | None]:
    return {key: r.first_admitted for key, r in simulator.all_records().items()}


def test_a_start_estimate_on_a_tree_churning_every_30_seconds_ends_once_it_repeats() -> None:
    scheduler = _pending_gang_and_small()
    pace = Pace(requeue_delay=1.0, eviction_delay=30.0)
    for factor in (0.5, 1.0):  # the earliest run, the latest
        run = forward_run(scheduler, scheduler.now, factor, pace, until="default/gang")
        run.run()
        assert run.repeating == {"c"}
        assert run.now < scheduler.now + 3600  # not the horizon, 30 days on
    estimate = estimate_start(scheduler, "default/gang", pace=pace)
    assert (estimate.earliest, estimate.latest) == (None, None)
    assert estimate_all(scheduler, pace=pace)["default/gang"] == estimate


def test_the_churning_tree_is_found_repeating_after_a_few_turns() -> None:
    workloads = [_job("gang", "gangs", 0, 50, 6, 9, priority=2), _job("small", "small", 1, 15, 5)]
    simulator = _run(
        _policy(),
        workloads,
        stop_repeating=True,
        eviction_delay=30.0,
        requeue_delay=1.0,
        horizon=30 * DAY,
    )
    assert simulator.repeating == {"c"}
    assert simulator.repeats is not None
    assert simulator.repeats.period["c"] > 0
    # Found within a few turns, not at the horizon.
    assert simulator.now < 20 * simulator.repeats.period["c"]
    records = simulator.all_records()
    assert records["default/gang"].first_admitted is None
    assert records["default/small"].first_admitted is not None


def test_a_replay_without_a_horizon_ends_once_its_churning_tree_repeats() -> None:
    # Without a horizon the churn kept the replay going for ever
    # (``manage.py simulate`` on it never returned). "later" runs and
    # finishes meanwhile: what it leaves behind is no part of the state.
    workloads = [
        _job("gang", "gangs", 0, 50, 6, 9, priority=2),
        _job("small", "small", 1, 15, 5),
        _job("later", "lender", 2, 60, 1),
    ]
    simulator = Simulator(
        _policy(), [(w, "batch") for w in workloads], eviction_delay=30.0, requeue_delay=1.0
    )
    simulator.begin()
    simulator.advance(until=DAY)
    assert simulator.done and simulator.repeating == {"c"}
    assert simulator.now < 3600
    result = simulator.result()
    assert result.livelocks == 1  # a loop of preemptions, counted as one
    assert result.records["default/later"].finished == 62
    assert result.records["default/gang"].first_admitted is None


def test_a_tree_left_repeating_is_left_at_the_same_time_in_a_split_replay() -> None:
    # A queue of its own takes work until long after the tree starts to
    # churn. The tree is watched from its own last arrival on, replayed with
    # the other or on its own (queues.engine.split): merged, the same result.
    queues = dict(_policy().cluster_queues)
    queues["solo"] = dataclasses.replace(queues["lender"], name="solo", cohort=None)
    policy = dataclasses.replace(_policy(), cluster_queues=queues)
    workloads = [
        _job("gang", "gangs", 0, 50, 6, 9, priority=2),
        _job("small", "small", 1, 15, 5),
        *(_job(f"solo-{i}", "solo", 10.0 * i, 25, 4) for i in range(300)),
    ]
    whole = Simulator(policy, [(w.copied(), "c") for w in workloads])
    result = whole.run()
    assert whole.repeating == {"c"}
    finished = whole.all_records()["default/solo-299"].finished
    assert finished is not None and finished > 2_990
    assert everything(result) == everything(
        replay_split(policy, [(w.copied(), "c") for w in workloads])
    )


def test_runs_with_a_horizon_play_to_it_unless_asked_to_stop_repeats() -> None:
    policy, scheduler = _policy(), _pending_gang_and_small()
    assert watch_for(policy, scheduler, None, None) is not None
    assert watch_for(policy, scheduler, None, DAY) is None  # its figures, exact to the end
    assert watch_for(policy, scheduler, True, DAY) is not None
    assert watch_for(policy, scheduler, False, None) is None
    shared = dataclasses.replace(policy, fair_sharing=True)
    assert watch_for(shared, Scheduler(shared), True, None) is None


def _random_scene(rng: random.Random) -> tuple[Policy, list[Workload], dict[str, float]]:
    policy = _policy()
    if rng.random() < 0.5:
        queues = dict(policy.cluster_queues)
        queues["small"] = dataclasses.replace(
            queues["small"], queueing_strategy=QueueingStrategy.STRICT_FIFO
        )
        policy = dataclasses.replace(policy, cluster_queues=queues)
    workloads = []
    if rng.random() < 0.7:  # the churning pair, among others
        workloads.append(_job("gang", "gangs", rng.randint(0, 60), 50, 6, 9, priority=2))
        small = _job("small", "small", rng.randint(0, 60), rng.choice([15, 400, 5_000]), 5)
        small.checkpoint_interval = rng.choice([None, 1.0])
        workloads.append(small)
    for index in range(rng.randint(0 if workloads else 2, 4)):
        queue = rng.choice(["gangs", "small", "lender"])
        gpus = [rng.choice([1, 2, 5, 6, 9])] + ([rng.choice([6, 9])] if rng.random() < 0.4 else [])
        runtime = rng.choice([15.0, 40.0, 300.0, 5_000.0, float("inf")])
        workload = Workload(
            name=f"w{index}",
            cluster_queue=queue,
            pod_sets=tuple(PodSet(f"ps{i}", 1, {GPU: n}) for i, n in enumerate(gpus)),
            priority=rng.choice([0, 1, 2]),
            creation_time=float(rng.randint(0, 120)),
            runtime=runtime,
            checkpoint_interval=rng.choice([None, None, 1.0, 7.0]),
        )
        workloads.append(workload)
    pace = {
        "eviction_delay": rng.choice([0.0, 5.0, 30.0]),
        "requeue_delay": rng.choice([0.0, 1.0]),
        "horizon": rng.choice([600.0, 3600.0, 4 * 3600.0]),
    }
    return policy, workloads, pace


def test_stopping_a_repeating_group_changes_no_first_admission() -> None:
    # Scenes drawn at random around the churning tree, each run to its horizon
    # whole and with repeats stopped: every workload's first admission is
    # the same. Some scenes repeat, some do not.
    rng = random.Random(18)
    repeated = 0
    for _ in range(100):
        policy, workloads, pace = _random_scene(rng)
        watched = _run(policy, workloads, stop_repeating=True, **pace)
        whole = _run(policy, workloads, stop_repeating=False, **pace)
        assert _first_admissions(watched) == _first_admissions(whole), (workloads, pace)
        repeated += bool(watched.repeating)
    assert repeated >= 10


def test_every_workload_field_is_either_kept_or_known_unread() -> None:
    # A field added to Workload without a word here could decide something
    # a repeat does not hold: it must be placed in one of the lists.
    named = [*SCHEDULING_FIELDS, *TIME_FIELDS, *ORDER_FIELDS, *DICT_FIELDS, *UNREAD_FIELDS]
    assert sorted(named) == sorted(f.name for f in dataclasses.fields(Workload))
    assert len(named) == len(set(named))


def test_times_from_before_the_run_are_kept_as_they_are_the_rest_from_now() -> None:
    assert shifted(None, 100.0, 10.0) is None
    assert shifted(5.0, 100.0, 10.0) == ("at", 5.0)
    assert shifted(40.0, 100.0, 10.0) == ("in", -60.0)
    assert shifted(float("inf"), 100.0, 10.0) == ("at", float("inf"))


def _churning_simulator() -> Simulator:
    """The churning tree a few turns in: "small" admitted again, the gang
    about to preempt it."""
    workloads = [_job("gang", "gangs", 0, 50, 6, 9, priority=2), _job("small", "small", 1, 15, 5)]
    simulator = Simulator(
        _policy(),
        [(w, "batch") for w in workloads],
        start=0.0,
        horizon=DAY,
        eviction_delay=30.0,
        requeue_delay=1.0,
        stop_repeating=True,
    )
    simulator.begin()
    simulator.advance(until=40.0)
    return simulator


def test_a_state_differs_once_anything_it_keeps_differs() -> None:
    simulator = _churning_simulator()
    now = simulator.now
    before = simulator.state_of("c", now)
    assert before is not None
    small = simulator.scheduler.workloads["default/small"]
    gang = simulator.scheduler.workloads["default/gang"]
    changes = [
        (small, "work_done", small.work_done + 1.0),
        (small, "requeue_count", small.requeue_count + 1),
        (small, "checkpoint_interval", 5.0),
        (gang, "priority", 3),
        (gang, "creation_time", gang.creation_time - 1.0),
        (gang, "queued_at", now - 5.0),
        (gang, "requeue_at", now + 5.0),
        (gang, "check_states", {"approval": "Pending"}),
        (gang, "active", False),
    ]
    for workload, name, value in changes:
        kept = getattr(workload, name)
        setattr(workload, name, value)
        assert simulator.state_of("c", now) != before, name
        setattr(workload, name, kept)
        assert simulator.state_of("c", now) == before, name
    # The run's own clock: the same state a second later is not the same.
    assert simulator.state_of("c", now + 1.0) != before
    simulator._push(now + 100.0, "unpark", "c")
    assert simulator.state_of("c", now) != before


def test_a_state_says_which_trees_of_its_group_ask_for_parked_work_to_queue_again() -> None:
    # Two cohort trees in one group: their flavor names a topology with no
    # nodes yet (no placer). Parked work queues again only in the trees that
    # asked, so which ones asked is part of the state, not just whether any
    # did (a review's counterexample: equal states, one admitting "p").
    def queue(name: str, cohort: str) -> ClusterQueue:
        flavors = (FlavorQuotas("a", {GPU: Quota(4)}),)
        return ClusterQueue(name, cohort=cohort, resource_groups=(ResourceGroup((GPU,), flavors),))

    policy = Policy(
        flavors={"a": ResourceFlavor("a", topology_name="racks")},
        cohorts={"c": Cohort("c"), "d": Cohort("d")},
        cluster_queues={"cq": queue("cq", "c"), "dq": queue("dq", "d")},
    )
    workloads = [_job("a", "cq", 0, 100, 4), _job("h", "dq", 0, 100, 4), _job("p", "dq", 1, 50, 4)]
    simulator = Simulator(policy, [(w, "x") for w in workloads], horizon=1_000.0)
    simulator.begin()
    simulator.advance(until=100.5)  # "a" and "h" finished at 100; "p" parked until 101
    group = simulator.scheduler.group_of["cq"]
    assert group == simulator.scheduler.group_of["dq"]
    assert simulator.scheduler.roots_asking_to_unpark(group) == ("c", "d")
    state = simulator.state_of(group, simulator.now)
    assert state is not None and state[0][-1] == ("c", "d")


def test_an_eviction_earlier_than_a_creation_in_queue_order_takes_no_state() -> None:
    # Shifted on, "small"'s eviction time would pass "late"'s creation time
    # and the two would swap in queue order: no state is taken while one
    # is earlier than the other.
    simulator = _churning_simulator()
    now = simulator.now
    late = _job("late", "small", now, 15, 1)
    late.queued_at = late.creation_time
    simulator.scheduler.add(late)
    small = simulator.scheduler.workloads["default/small"]
    small.queued_at = now - 1.0  # an eviction during the run, before "late" was created
    assert simulator.state_of("c", now) is None
    small.queued_at = now + 1.0
    assert simulator.state_of("c", now) is not None
