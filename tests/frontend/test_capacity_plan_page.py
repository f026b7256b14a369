"""The capacity plan page of a plan whose replays were shared out among the
workers: who replayed how many for how long, what each replays now, and
how many were replayed ahead of the search and not asked for."""

from __future__ import annotations

from django.test import Client

from tests.jobs.conftest import Org, org
from whatif.models import CapacityPlan, PlanReplay, ReplayPartState, WhatIfState

__all__ = ["org"]


def page(org: Org, plan: CapacityPlan) -> str:
    client = Client()
    client.force_login(org.users["admin"])
    response = client.get(f"/capacity/{plan.pk}/")
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def rows(plan: CapacityPlan) -> None:
    done = ReplayPartState.DONE
    PlanReplay.objects.bulk_create(
        [
            PlanReplay(plan=plan, flavor="h100", gpus=128, seed=0, state=done, asked=True,
                       worker="celery@a", seconds=3.5),
            PlanReplay(plan=plan, flavor="h100", gpus=144, seed=0, state=done, asked=True,
                       worker="celery@b", seconds=5.75),
            PlanReplay(plan=plan, flavor="h100", gpus=120, seed=0, state=done, asked=False,
                       worker="celery@b", seconds=4.0),
            PlanReplay(plan=plan, flavor="h100", gpus=160, seed=0,
                       state=ReplayPartState.RUNNING, worker="celery@a"),
            PlanReplay(plan=plan, flavor="h100", gpus=176, seed=0),  # queued
        ]
    )  # fmt: skip


def test_a_running_plan_says_who_replays_what(org: Org) -> None:
    plan = CapacityPlan.objects.create(source="scenario", state=WhatIfState.RUNNING)
    rows(plan)
    shown = page(org, plan)
    assert "Replaying capacities, shared out among the workers." in shown
    assert (
        '<p class="muted" id="capacity-workers">Replays shared out among the workers: '
        "celery@a, 1 replay in 4 s (now h100 at 160 GPUs); celery@b, 2 replays in 10 s. "
        "1 of them was replayed ahead of the search and not asked for.</p>"
    ) in shown


def test_a_plan_searched_in_one_process_says_nothing_of_workers(org: Org) -> None:
    plan = CapacityPlan.objects.create(source="scenario", state=WhatIfState.RUNNING)
    shown = page(org, plan)
    assert "at one capacity after another" in shown and "capacity-workers" not in shown
    PlanReplay.objects.create(plan=plan, flavor="h100", gpus=128, seed=0)  # queued only
    assert "capacity-workers" not in page(org, plan)


def test_a_finished_plan_no_longer_says_a_worker_replays(org: Org) -> None:
    plan = CapacityPlan.objects.create(source="scenario", state=WhatIfState.FAILED)
    rows(plan)
    shown = page(org, plan)
    assert "celery@a, 1 replay in 4 s;" in shown and "now h100" not in shown
