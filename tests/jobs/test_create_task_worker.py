"""The create task on a real Celery worker (Redis): delivered three times, as
redeliveries after lost acknowledgements would be, it creates the job once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.models import JobRequest, JobState
from jobs.tasks import create_job
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import SimulatedEvent
from tests.celery_broker import redis_worker, wait_until
from tests.jobs.conftest import Org, job

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker() -> Iterator[None]:
    with redis_worker():
        yield


def test_a_create_delivered_twice_creates_the_job_once(org: Org, worker: None) -> None:
    response = org.alice.post("/api/v1/jobs/", job(), format="json")
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]  # the commit queued one create; send two more
    create_job.delay(job_id)
    create_job.delay(job_id)
    wait_until(
        lambda: JobRequest.objects.get(pk=job_id).state == JobState.QUEUED,
        "the worker to create the job",
    )
    # A second job, queued behind the duplicates: once it exists, they have run.
    marker = org.alice.post("/api/v1/jobs/", job(name="marker"), format="json").json()["id"]
    wait_until(
        lambda: JobRequest.objects.get(pk=marker).state == JobState.QUEUED,
        "the worker to drain its queue",
    )
    jobs = SimulatedBackend().list(TYPES["Job"])[0]
    assert sorted(j["metadata"]["name"] for j in jobs) == ["marker", "qwen-sft"]
    added = SimulatedEvent.objects.filter(kind="Job", event_type="ADDED").count()
    assert added == 2  # one each
    assert JobRequest.objects.get(pk=job_id).create_attempts == 1
