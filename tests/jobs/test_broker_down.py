"""A job stored while the broker is down is answered as stored (202, with
why it waits), and its create is queued by the next sweep once the broker is
back, not a minute later; the sweep then leaves it to the usual schedule."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from controlplane.celery import app
from jobs.models import JobRequest, JobState
from jobs.services import QUEUE_UNAVAILABLE
from jobs.tasks import sweep_jobs
from tests.celery_broker import _drop_pools
from tests.jobs.conftest import Org, job

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def broker_down() -> Iterator[None]:
    """Celery pointed at a Redis nothing listens on: sending fails at once."""
    saved = {k: app.conf[k] for k in ("broker_url", "task_always_eager")}
    _drop_pools()
    app.conf.update(broker_url="redis://127.0.0.1:1/0", task_always_eager=False)
    try:
        yield
    finally:
        _drop_pools()
        app.conf.update(saved)


def test_a_job_stored_with_the_broker_down_is_a_202_then_swept_at_once(org: Org) -> None:
    with broker_down():
        response = org.alice.post("/api/v1/jobs/", job(), format="json")
        assert response.status_code == 202, response.content
        assert response.json()["reason"] == QUEUE_UNAVAILABLE
        assert "could not be queued" in response.json()["message"]
        assert sweep_jobs() == 0  # still down: stays marked for the next sweep
    stored = JobRequest.objects.get()
    assert stored.state == JobState.SUBMITTED and stored.reason == QUEUE_UNAVAILABLE
    assert sweep_jobs() == 1  # back (eager here): queued at once, not after a minute
    stored.refresh_from_db()
    assert stored.reason != QUEUE_UNAVAILABLE


def test_with_the_broker_up_the_job_is_a_201(org: Org) -> None:
    response = org.alice.post("/api/v1/jobs/", job(), format="json")
    assert response.status_code == 201
    assert response.json()["reason"] != QUEUE_UNAVAILABLE
