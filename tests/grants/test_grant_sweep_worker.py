"""The revert sweep on a real Celery worker (Redis): it reverts only grants
whose end has passed, and one whose end passed while Berth was down is
reverted by the first sweep after Berth comes back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.celery import app
from grants import lifecycle
from grants.models import GrantState, QuotaGrant
from grants.services import request_grant
from grants.tasks import revert_ended_grants
from tests.celery_broker import redis_worker, wait_until
from tests.grants.conftest import ask
from tests.grants.test_grant_lifecycle import nominal
from tests.jobs.conftest import Org

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def approved(org: Org, approver: Any, **overrides: Any) -> QuotaGrant:
    grant = request_grant(org.users["alice"], ask(**overrides))
    return lifecycle.approve(approver, grant.pk)


def state(grant: QuotaGrant) -> str:
    return QuotaGrant.objects.get(pk=grant.pk).state


def test_the_sweep_reverts_after_the_end_and_across_a_restart(org: Org, carol: Any) -> None:
    running = approved(org, carol)  # research +16, ends in three days
    short = approved(org, carol, cluster_queue="research-dev", amount="8")  # dev +8
    assert (nominal("research"), nominal("research-dev")) == (32, 16)

    # Berth is down: no worker, no beat. The short grant's end passes meanwhile.
    QuotaGrant.objects.filter(pk=short.pk).update(ends_at=timezone.now() - timedelta(hours=2))
    assert nominal("research-dev") == 16  # nothing reverts it while Berth is down

    with redis_worker():  # Berth is back: beat's first sweep
        revert_ended_grants.delay()
        wait_until(lambda: state(short) == GrantState.ENDED, "the sweep to end the short grant")
    assert (nominal("research"), nominal("research-dev")) == (32, 8)
    assert state(running) == GrantState.ACTIVE  # its end has not passed
    ended = QuotaGrant.objects.get(pk=short.pk)
    assert "min late" in ended.end_reason and ended.reverted[0]["done"] == -8


def test_beat_runs_the_sweep_every_minute(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["revert-ended-grants"]
    assert entry["task"] == revert_ended_grants.name and entry["schedule"] == 60
    assert entry["task"] in app.tasks
