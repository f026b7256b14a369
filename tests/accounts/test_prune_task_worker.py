"""The access-log retention task, run by a real Celery worker through Redis."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import AccessDenial
from accounts.tasks import prune_access_denials
from controlplane.celery import app
from tests.celery_broker import redis_worker as running_worker
from tests.celery_broker import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_worker() -> Iterator[None]:
    with running_worker():
        yield


def test_worker_prunes_old_entries(redis_worker: Any) -> None:
    old = AccessDenial.objects.create(reason="forbidden", username="old")
    AccessDenial.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=400))
    AccessDenial.objects.create(reason="forbidden", username="recent")

    # Delivered twice, as a retry after a lost acknowledgement would be: harmless.
    prune_access_denials.delay(older_than_days=365)
    prune_access_denials.delay(older_than_days=365)
    wait_until(
        lambda: not AccessDenial.objects.filter(username="old").exists(),
        "the worker to prune the old entry",
    )
    marker = AccessDenial.objects.create(reason="forbidden", username="marker")
    AccessDenial.objects.filter(pk=marker.pk).update(at=timezone.now() - timedelta(days=400))
    prune_access_denials.delay(older_than_days=365)  # queued behind the second delivery
    wait_until(
        lambda: not AccessDenial.objects.filter(username="marker").exists(),
        "the worker to drain the queue",
    )
    assert list(AccessDenial.objects.values_list("username", flat=True)) == ["recent"]


def test_embedded_mode_runs_tasks_in_process(db: Any) -> None:
    # No broker in the test settings: tasks run eagerly, before delay() returns.
    assert app.conf.task_always_eager is True
    old = AccessDenial.objects.create(reason="forbidden", username="old")
    AccessDenial.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=400))
    assert prune_access_denials.delay(older_than_days=365).get() == 1
    assert not AccessDenial.objects.exists()
