"""A capacity plan's replays shared out (``whatif.plan_scaleout``), on
PostgreSQL with tasks run as they are sent: the search answered through
``PlanReplay`` rows gives the result of the search run alone; replays run
ahead and not asked for are kept apart; claims, take-overs, an ended plan
and tampered inputs. ``test_plan_scaleout_workers.py`` has two real workers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from queues.engine.capacity_search import Search, Target
from tests.engine.test_capacity import request, steady
from tests.engine.test_capacity_lookahead import JITTERED, jittered
from whatif.models import CapacityPlan, PlanReplay, ReplayPartState, WhatIfState
from whatif.plan_scaleout import (
    ENDED_WITH_THE_PLAN,
    PlanEnded,
    ReplayFailed,
    SharedReplays,
    claim,
    replay_task,
    run_replay,
    search_apart,
)
from whatif.redrive import STALLED_AFTER, end_stalled

pytestmark = pytest.mark.django_db


def running_plan() -> CapacityPlan:
    now = timezone.now()
    return CapacityPlan.objects.create(
        source="scenario", state=WhatIfState.RUNNING, started_at=now, heartbeat_at=now
    )


@pytest.mark.parametrize("workers", [2, 3])
def test_the_search_shared_out_gives_the_search_alone_and_asks_each_replay_once(
    workers: int,
) -> None:
    plan = running_plan()
    alone = Search(jittered(16)).run()
    progress: list[tuple[int, int]] = []
    shared = search_apart(plan.pk, jittered(16), workers, lambda d, t: progress.append((d, t)))
    assert shared == alone
    rows = list(PlanReplay.objects.filter(plan=plan))
    asked = [(r.flavor, r.gpus, r.seed) for r in rows if r.asked]
    assert len(asked) == len(set(asked)) == alone["replays"]
    assert all(r.state == ReplayPartState.DONE for r in rows if r.asked)
    # Tasks ran as they were sent: the replays run ahead were done too, and
    # some of them were not what the search went on to ask.
    assert len(rows) > len(asked)
    assert len(progress) == alone["replays"] + 1 and progress[-1][0] == progress[-1][1]
    plan.refresh_from_db()
    assert bytes(plan.replay_inputs) == b"" and plan.inputs_signature == ""
    assert not PlanReplay.objects.filter(
        plan=plan, state__in=[ReplayPartState.QUEUED, ReplayPartState.RUNNING]
    ).exists()


def test_a_replay_no_longer_wanted_is_dropped_before_anyone_starts_it() -> None:
    plan = running_plan()
    shared = SharedReplays(plan.pk, jittered(16), workers=1)
    stray = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=400, seed=0)
    figures = shared(("h100", 16, 0))
    assert figures == Search(jittered(16)).replay("h100", 16, 0)
    assert not PlanReplay.objects.filter(pk=stray.pk).exists()
    (row,) = PlanReplay.objects.filter(plan=plan)
    assert (row.gpus, row.asked, row.state) == (16, True, ReplayPartState.DONE)


def test_a_replay_running_ahead_that_can_no_longer_be_asked_is_dropped_and_stops() -> None:
    plan = running_plan()
    shared = SharedReplays(plan.pk, jittered(16), workers=1)
    stray = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=400, seed=0)
    token = claim(stray.pk)  # a worker started it
    assert token is not None
    shared(("h100", 16, 0))
    assert not PlanReplay.objects.filter(pk=stray.pk).exists()
    assert run_replay(stray.pk, token, jittered(16)) == "taken over"


def test_a_replay_of_a_plan_that_ended_stops_and_stores_nothing() -> None:
    plan = running_plan()
    long = request(steady(8, count=3000), seeds=1, perturbation=JITTERED)
    long.targets = [Target("training-large", 90, 10**9)]  # never fails: it would run whole
    SharedReplays(plan.pk, long, workers=2)
    row = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=8, seed=0)
    token = claim(row.pk)
    assert token is not None and claim(row.pk) is None  # claimed once
    CapacityPlan.objects.filter(pk=plan.pk).update(state=WhatIfState.FAILED)
    assert run_replay(row.pk, token, long) == "taken over"
    row.refresh_from_db()
    assert row.state == ReplayPartState.RUNNING and row.figures is None
    # And a worker sent it later finds no inputs to replay.
    assert replay_task(row.pk) == "skipped"


def test_a_silent_workers_replay_is_taken_over_and_the_old_claim_stores_nothing() -> None:
    plan = running_plan()
    SharedReplays(plan.pk, jittered(16), workers=2)
    row = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=16, seed=0)
    old = claim(row.pk)
    assert old is not None
    PlanReplay.objects.filter(pk=row.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=6))
    new = claim(row.pk)
    assert new is not None and new != old
    assert run_replay(row.pk, old) == "taken over"
    assert run_replay(row.pk, new) == "done"
    row.refresh_from_db()
    assert row.figures == Search(jittered(16)).replay("h100", 16, 0)


def test_tampered_inputs_are_refused_and_the_search_fails_saying_so() -> None:
    plan = running_plan()
    shared = SharedReplays(plan.pk, jittered(16), workers=2)
    stored = bytes(CapacityPlan.objects.get(pk=plan.pk).replay_inputs)
    CapacityPlan.objects.filter(pk=plan.pk).update(replay_inputs=stored[:-1] + b"\0")
    row = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=16, seed=0)
    assert replay_task(row.pk) == "failed"
    row.refresh_from_db()
    assert "signature" in row.error and row.figures is None
    with pytest.raises(ReplayFailed, match="h100 at 16 GPUs failed: Unsigned"):
        shared(("h100", 16, 0))


def test_a_stalled_plan_ends_its_replays_and_drops_its_inputs() -> None:
    plan = running_plan()
    SharedReplays(plan.pk, jittered(16), workers=2)
    queued = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=16, seed=0)
    CapacityPlan.objects.filter(pk=plan.pk).update(
        heartbeat_at=timezone.now() - STALLED_AFTER - timedelta(minutes=1)
    )
    assert end_stalled()["capacity_plans"] == 1
    queued.refresh_from_db()
    assert (queued.state, queued.error) == (ReplayPartState.FAILED, ENDED_WITH_THE_PLAN)
    assert claim(queued.pk) is None
    plan.refresh_from_db()
    assert plan.state == WhatIfState.FAILED and bytes(plan.replay_inputs) == b""


def test_a_search_whose_plan_was_closed_under_it_stops_and_leaves_nothing_running() -> None:
    """Its task was taken for lost (silent 30 minutes) and came back: it
    queues nothing more and ends its replays, rather than wait for ever."""
    plan = running_plan()
    CapacityPlan.objects.filter(pk=plan.pk).update(state=WhatIfState.FAILED)
    with pytest.raises(PlanEnded):
        search_apart(plan.pk, jittered(16), 2)
    assert not PlanReplay.objects.filter(plan=plan).exclude(state=ReplayPartState.FAILED).exists()
    plan.refresh_from_db()
    assert bytes(plan.replay_inputs) == b""


def test_a_replay_that_fails_in_itself_fails_and_one_whose_caller_failed_is_queued_again() -> None:
    plan = running_plan()
    req = jittered(16)
    SharedReplays(plan.pk, req, workers=2)
    broken = PlanReplay.objects.create(plan=plan, flavor="a100", gpus=8, seed=0)
    token = claim(broken.pk)
    assert token is not None
    assert run_replay(broken.pk, token, req) == "failed"  # no such flavor: the engine says so
    broken.refresh_from_db()
    assert broken.state == ReplayPartState.FAILED and "a100" in broken.error

    row = PlanReplay.objects.create(plan=plan, flavor="h100", gpus=16, seed=0)
    token = claim(row.pk)
    assert token is not None

    def look() -> None:
        raise RuntimeError("the plan's own look failed")

    long = request(steady(8, count=3000), seeds=1, perturbation=JITTERED)
    long.targets = [Target("training-large", 90, 10**9)]  # runs long enough to beat
    with pytest.raises(RuntimeError, match="own look"):
        run_replay(row.pk, token, long, between=look)
    row.refresh_from_db()
    assert (row.state, row.token, row.error) == (ReplayPartState.QUEUED, "", "")
    assert replay_task(row.pk) == "done"  # any worker takes it up again
