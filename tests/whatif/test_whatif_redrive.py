"""A what-if run or capacity plan whose task was lost (the broker down at the
commit) is sent again by the redrive sweep once it has waited REDRIVE_AFTER,
and runs once; one that waits less is left alone."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from controlplane.embedded import EmbeddedLoop
from tests.jobs.conftest import GPU, Org, org
from tests.whatif.test_capacity_plan import URL, body, steady
from tests.whatif.test_whatif_task import SCENARIO
from whatif import service as whatif
from whatif import tasks as whatif_tasks
from whatif.models import CapacityPlan, WhatIfRun, WhatIfState
from whatif.redrive import REDRIVE_AFTER, STALLED_AFTER, end_stalled, redrive_queued
from whatif.tasks import redrive_queued_work

__all__ = ["org", "steady"]


def test_lost_runs_and_plans_are_sent_again_after_a_while_and_run_once(
    org: Org, steady: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):  # the task is lost
        run = whatif.create_run(
            org.users["admin"],
            source="scenario",
            scenario=SCENARIO.read_text(),
            changes=[
                {"cluster_queue": "a", "field": "nominal_quota", "flavor": "default",
                 "resource": GPU, "value": "8"},
            ],
        )  # fmt: skip
        answer = org.admin.post(URL, body(), format="json")
    assert answer.status_code == 202, answer.content
    plan_id = answer.json()["id"]
    now = timezone.now()

    assert redrive_queued(now + REDRIVE_AFTER - timedelta(seconds=5)) == {
        "whatif_runs": 0,
        "capacity_plans": 0,
    }
    assert WhatIfRun.objects.get(pk=run.pk).state == WhatIfState.QUEUED

    # Tasks run eagerly here: sent again, each runs to its end.
    later = now + REDRIVE_AFTER + timedelta(seconds=5)
    assert redrive_queued(later) == {"whatif_runs": 1, "capacity_plans": 1}
    assert WhatIfRun.objects.get(pk=run.pk).state == WhatIfState.SUCCEEDED
    assert CapacityPlan.objects.get(pk=plan_id).state == WhatIfState.SUCCEEDED
    assert redrive_queued(later) == {"whatif_runs": 0, "capacity_plans": 0}


def test_celery_beat_runs_the_sweep() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["redrive-whatif"]
    assert entry["task"] == redrive_queued_work.name == "whatif.tasks.redrive_queued"
    assert timedelta(seconds=entry["schedule"]) <= REDRIVE_AFTER


def test_a_plan_whose_worker_was_lost_fails_after_a_while_and_a_live_one_is_left_alone(
    org: Org, steady: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):  # nobody takes them up
        lost = org.admin.post(URL, body(), format="json").json()["id"]
        live = org.admin.post(URL, body(), format="json").json()["id"]
    now = timezone.now()
    CapacityPlan.objects.filter(pk=lost).update(
        state=WhatIfState.RUNNING, heartbeat_at=now - STALLED_AFTER - timedelta(seconds=1)
    )
    CapacityPlan.objects.filter(pk=live).update(
        state=WhatIfState.RUNNING, heartbeat_at=now - STALLED_AFTER + timedelta(seconds=1)
    )
    assert end_stalled(now) == {"whatif_runs": 0, "capacity_plans": 1}
    ended = CapacityPlan.objects.get(pk=lost)
    assert ended.state == WhatIfState.FAILED and "no progress for 30 minutes" in ended.error
    assert CapacityPlan.objects.get(pk=live).state == WhatIfState.RUNNING
    # The API says what happened and what to do.
    shown = org.admin.get(f"{URL}{lost}/").json()
    assert shown["state"] == "failed" and "ask again" in shown["error"]


def test_the_embedded_loop_ends_a_plan_left_running_by_a_berth_stopped_mid_run(
    org: Org, steady: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        plan = org.admin.post(URL, body(), format="json").json()["id"]
    CapacityPlan.objects.filter(pk=plan).update(
        state=WhatIfState.RUNNING,
        heartbeat_at=timezone.now() - STALLED_AFTER - timedelta(minutes=1),
    )
    EmbeddedLoop().run_once()
    assert CapacityPlan.objects.get(pk=plan).state == WhatIfState.FAILED


def test_the_beat_task_still_ends_stalled_work_when_re_sending_fails(
    org: Org,
    steady: dict[str, datetime],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        plan = org.admin.post(URL, body(), format="json").json()["id"]
    silent_since = timezone.now() - STALLED_AFTER - timedelta(minutes=1)
    CapacityPlan.objects.filter(pk=plan).update(
        state=WhatIfState.RUNNING, heartbeat_at=silent_since
    )

    def broker_down() -> dict[str, int]:
        raise ConnectionError("the broker is down")

    monkeypatch.setattr(whatif_tasks, "redrive_queued", broker_down)
    assert redrive_queued_work() == {"ended": {"whatif_runs": 0, "capacity_plans": 1}}
    assert CapacityPlan.objects.get(pk=plan).state == WhatIfState.FAILED
