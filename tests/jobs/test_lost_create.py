"""A create message lost from Redis (taken by a worker that was then killed:
Redis hands an unacknowledged message out again only after its visibility
timeout, hours) is queued again by the sweeper once no worker has taken it up
``BERTH_JOB_CREATE_REDRIVE_SECONDS`` after it was queued, not a minute or
hours later; once, and only while the queue is short. The job is created once
however many of its messages arrive, even two at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from django.db import connection
from django.utils import timezone

from controlplane.celery import app
from jobs.models import JobRequest, JobState
from jobs.services import CREATE_REQUEUED, CREATE_RETRYING, create_on_cluster
from jobs.tasks import create_job, sweep_jobs, waiting_messages
from queues.backends.base import TYPES, ClusterBackend
from queues.backends.simulated import SimulatedBackend
from queues.models import SimulatedEvent
from tests.celery_broker import redis_queue, wait_until
from tests.envtest.cluster import EnvtestCluster
from tests.jobs.conftest import Org, job
from tests.jobs.test_broker_down import broker_down

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/jobs/"


def aged(job_id: int, seconds: float) -> None:
    """Queued (or last re-queued) ``seconds`` ago."""
    JobRequest.objects.filter(pk=job_id).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


@pytest.fixture
def queue() -> Iterator[tuple[redis.Redis, str]]:
    """Berth's tasks go to a Redis queue private to the test; no worker yet."""
    with redis_queue() as (url, name):
        client = redis.Redis.from_url(url)
        try:
            yield client, name
        finally:
            client.delete(name)
            client.close()


@pytest.mark.worker
def test_a_lost_create_is_queued_again_within_seconds_and_made_once(
    org: Org, queue: tuple[redis.Redis, str], settings: Any
) -> None:
    broker, name = queue
    settings.BERTH_JOB_CREATE_REDRIVE_SECONDS = 10
    response = org.alice.post(URL, job(), format="json")
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]
    assert broker.llen(name) == 1  # committed and queued
    lost = broker.rpop(name)  # a worker took it and was killed before running it
    assert isinstance(lost, bytes) and waiting_messages() == 0

    assert sweep_jobs() == 0  # queued just now: it may still be on its way
    aged(job_id, 9)
    assert sweep_jobs() == 0
    aged(job_id, 11)  # no worker took it up in 10 s, and nothing waits in line
    assert sweep_jobs() == 1
    stored = JobRequest.objects.get(pk=job_id)
    assert (stored.state, stored.reason) == (JobState.SUBMITTED, CREATE_REQUEUED)
    assert "no worker had taken up its creation 10 s after" in stored.message
    assert broker.llen(name) == 1
    aged(job_id, 30)
    assert sweep_jobs() == 0  # re-driven early once; from here the minute's sweep

    # The lost message comes back after all (its visibility timeout), and one more:
    # three messages for one create.
    broker.lpush(name, lost)
    create_job.delay(job_id)
    assert waiting_messages() == 3
    with start_worker(
        app, pool="solo", loglevel="WARNING", perform_ping_check=False, queues=[name]
    ):
        wait_until(
            lambda: JobRequest.objects.get(pk=job_id).state == JobState.QUEUED,
            "the worker to create the job",
        )
        # Queued behind the duplicates: once it exists, they have all run.
        marker = org.alice.post(URL, job(name="marker"), format="json").json()["id"]
        wait_until(
            lambda: JobRequest.objects.get(pk=marker).state == JobState.QUEUED,
            "the worker to drain its queue",
        )
    names = sorted(j["metadata"]["name"] for j in SimulatedBackend().list(TYPES["Job"])[0])
    assert names == ["marker", "qwen-sft"]
    assert SimulatedEvent.objects.filter(kind="Job", event_type="ADDED").count() == 2
    stored.refresh_from_db()
    assert stored.create_attempts == 1 and stored.reason == "Created"


@pytest.mark.worker
def test_with_a_long_queue_an_unstarted_create_waits_its_turn(
    org: Org, queue: tuple[redis.Redis, str], settings: Any
) -> None:
    broker, name = queue
    settings.BERTH_JOB_REDRIVE_QUEUE_LIMIT = 3
    ids = [org.alice.post(URL, job(name=f"line-{n}"), format="json").json()["id"] for n in range(3)]
    assert waiting_messages() == 3  # no worker: all in line
    for job_id in ids:
        aged(job_id, 30)
    assert sweep_jobs() == 0  # a long queue: waiting, not lost
    assert broker.llen(name) == 3
    for job_id in ids:
        aged(job_id, 61)
    assert sweep_jobs() == 3  # the minute's sweep still applies
    assert sweep_jobs() == 0  # and counts its minute from there


@pytest.mark.worker
def test_a_create_whose_worker_died_mid_attempt_is_queued_again_within_seconds(
    org: Org, queue: tuple[redis.Redis, str], settings: Any
) -> None:
    """A worker that began an attempt (counted) and was killed before it
    finished or said it would retry: the attempt is taken for lost after the
    same seconds, not after the minute's sweep; once."""
    broker, name = queue
    settings.BERTH_JOB_CREATE_REDRIVE_SECONDS = 10
    job_id = org.alice.post(URL, job(), format="json").json()["id"]
    broker.delete(name)
    # The attempt's first step, as create_on_cluster takes it; then the kill.
    JobRequest.objects.filter(pk=job_id).update(create_attempts=1)
    aged(job_id, 9)
    assert sweep_jobs() == 0  # the attempt may still be under way
    aged(job_id, 11)
    assert sweep_jobs() == 1
    stored = JobRequest.objects.get(pk=job_id)
    assert (stored.state, stored.reason) == (JobState.SUBMITTED, CREATE_REQUEUED)
    assert "its creation (attempt 1) had not finished 10 s after it began" in stored.message
    assert broker.llen(name) == 1
    aged(job_id, 30)
    assert sweep_jobs() == 0  # early once; from here the minute's sweep


def test_a_create_that_said_it_retries_waits_for_its_retry(org: Org, settings: Any) -> None:
    """An attempt that failed and said so (``CreateRetrying``) has a Celery retry
    on its way: the sweeper leaves it to that for the minute."""
    settings.BERTH_JOB_CREATE_REDRIVE_SECONDS = 10
    with broker_down():
        job_id = org.alice.post(URL, job(), format="json").json()["id"]
    JobRequest.objects.filter(pk=job_id).update(create_attempts=1, reason=CREATE_RETRYING)
    aged(job_id, 30)
    assert waiting_messages() == 0
    assert sweep_jobs() == 0
    aged(job_id, 61)
    assert sweep_jobs() == 1


def test_with_the_broker_down_nothing_is_redriven_early(org: Org) -> None:
    with broker_down():
        job_id = org.alice.post(URL, job(), format="json").json()["id"]
        # As if it had been queued, then lost; and now the broker is down.
        JobRequest.objects.filter(pk=job_id).update(reason="", message="")
        aged(job_id, 30)
        assert waiting_messages() is None  # the broker cannot say
        assert sweep_jobs() == 0
    stored = JobRequest.objects.get(pk=job_id)
    assert stored.state == JobState.SUBMITTED and stored.reason == ""


class BothLookFirst:
    """Berth's backend for two concurrent creates of one job: neither applies
    until both have looked for the object (and found none), the interleaving
    in which a create could be made twice."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.looked = threading.Barrier(2, timeout=30)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.backend, attribute)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        found = self.backend.get(*args, **kwargs)
        self.looked.wait()
        return found


def test_two_creates_of_one_job_at_once_make_one_object_on_the_real_server(
    org: Org, kube: EnvtestCluster
) -> None:
    kube.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    with broker_down():  # stored, its create not run yet
        response = org.alice.post(URL, job(nodes=1), format="json")
    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    backend = BothLookFirst(kube.backend)
    outcomes: list[str] = []

    def create() -> None:
        try:
            outcomes.append(create_on_cluster(backend, job_id))
        finally:
            connection.close()

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["created", "created"]  # both applied, neither saw the other
    [made] = kube.objects("Job")
    assert made["metadata"]["name"] == "qwen-sft"
    assert made["metadata"]["annotations"]["berth.dev/job-request"] == str(job_id)
    assert made["metadata"]["generation"] == 1  # the second apply changed nothing
    stored = JobRequest.objects.get(pk=job_id)
    assert stored.state == JobState.QUEUED and stored.cluster_uid == made["metadata"]["uid"]
    assert stored.create_attempts == 2
    # A third, later, finds the job created and does nothing.
    assert create_on_cluster(kube.backend, job_id) == "skipped"
    assert len(kube.objects("Job")) == 1
