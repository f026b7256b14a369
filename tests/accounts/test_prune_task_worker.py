"""The access-log retention task, run by a real Celery worker through Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.utils import timezone

from accounts.models import AccessDenial
from accounts.tasks import prune_access_denials
from controlplane.celery import app
from tests.celery_broker import redis_queue

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_worker() -> Iterator[None]:
    """A worker thread consuming from Redis, on a queue private to this test run."""
    # Berth's tasks keep no results (state lives in PostgreSQL), so the test
    # watches the database instead of waiting on a result backend.
    with (
        redis_queue() as (_, queue),
        start_worker(
            app,
            pool="solo",
            loglevel="WARNING",
            perform_ping_check=False,
            queues=[queue],
            shutdown_timeout=30,
        ),
    ):
        yield


def wait_until(condition: Any, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


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
