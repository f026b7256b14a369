"""Creates against a cluster that keeps failing for a while (503s, 429s with
Retry-After: what a real API server cannot be made to answer on demand, so the
loopback double answers them): each failed attempt is said on the job and tried
again with backoff, by the sweeper in the embedded mode and by the task itself
on a real Celery worker, until ``BERTH_JOB_CREATE_ATTEMPTS`` attempts have
failed, when the job is rejected saying how many and how the last one failed.
The API answers 201 throughout. The setting is checked at start-up."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone

from jobs.models import JobRequest, JobState
from jobs.tasks import create_job, sweep_jobs
from tests.celery_broker import redis_worker, wait_until
from tests.controlplane.test_startup import clean_env, run
from tests.jobs.cluster_roles import berth_uses
from tests.jobs.conftest import Org, job
from tests.kube.apiserver import FakeApiServer

URL = "/api/v1/jobs/"
JOBSET = r"/namespaces/research/jobsets/sft$"


@pytest.fixture
def server(
    org: Org, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[FakeApiServer]:
    """BERTH_CLUSTER=kubernetes with a kubeconfig naming the loopback double."""
    double = FakeApiServer().start()
    double.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "double", "cluster": {"server": double.url}}],
                "users": [{"name": "berth", "user": {"token": "test"}}],
                "contexts": [{"name": "double", "context": {"cluster": "double", "user": "berth"}}],
                "current-context": "double",
            }
        )
    )
    try:
        with berth_uses(config, settings, monkeypatch, tmp_path / "home"):
            yield double
    finally:
        double.stop()
    assert double.internal_errors == []


def applies(server: FakeApiServer) -> int:
    return sum(1 for c in server.calls if c.method == "PATCH" and c.path.endswith("/jobsets/sft"))


def a_minute_later(job_id: int) -> None:
    """The last attempt was over a minute ago (the sweeper's wait)."""
    JobRequest.objects.filter(pk=job_id).update(updated_at=timezone.now() - timedelta(seconds=61))


@pytest.mark.django_db(transaction=True)
def test_transient_errors_are_retried_then_the_job_is_rejected_after_the_cap(
    org: Org, server: FakeApiServer, settings: Any
) -> None:
    settings.BERTH_JOB_CREATE_ATTEMPTS = 3
    server.fail_next("PATCH", JOBSET, 503, times=10, body="etcdserver: leader changed")
    response = org.alice.post(URL, job(kind="JobSet", name="sft"), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    # Embedded: one attempt in the request, no sleeping in it; the job says so.
    assert (body["state"], body["reason"]) == ("submitted", "CreateRetrying")
    assert body["message"].startswith("attempt 1 of 3 to create it on the cluster failed")
    assert "503 etcdserver: leader changed" in body["message"]
    job_id = body["id"]
    assert applies(server) == 1

    assert sweep_jobs() == 0  # tried less than a minute ago: left alone
    a_minute_later(job_id)
    assert sweep_jobs() == 1
    stored = JobRequest.objects.get(pk=job_id)
    assert (stored.state, stored.create_attempts) == (JobState.SUBMITTED, 2)
    assert stored.message.startswith("attempt 2 of 3")
    assert sweep_jobs() == 0  # that attempt was just now

    a_minute_later(job_id)
    assert sweep_jobs() == 1
    stored.refresh_from_db()
    assert (stored.state, stored.reason) == (JobState.REJECTED, "CreateAttemptsExhausted")
    assert stored.message == (
        "not created on the cluster after 3 attempts (BERTH_JOB_CREATE_ATTEMPTS=3); the last "
        "one failed: apply JobSet research/sft: 503 etcdserver: leader changed"
    )
    assert stored.finished_at is not None and stored.create_attempts == 3
    assert applies(server) == 3
    a_minute_later(job_id)
    assert sweep_jobs() == 0  # ended: never tried again
    assert server.objects("jobsets", "jobset.x-k8s.io") == []


@pytest.mark.django_db(transaction=True)
def test_a_create_that_succeeds_before_the_cap_leaves_no_trace_of_the_failures(
    org: Org, server: FakeApiServer, settings: Any
) -> None:
    settings.BERTH_JOB_CREATE_ATTEMPTS = 3
    server.fail_next("PATCH", JOBSET, 429, times=2)
    job_id = org.alice.post(URL, job(kind="JobSet", name="sft"), format="json").json()["id"]
    a_minute_later(job_id)
    assert sweep_jobs() == 1
    assert JobRequest.objects.get(pk=job_id).message.startswith("attempt 2 of 3")
    a_minute_later(job_id)
    assert sweep_jobs() == 1
    stored = JobRequest.objects.get(pk=job_id)
    assert (stored.state, stored.reason, stored.create_attempts) == (JobState.QUEUED, "Created", 3)
    assert stored.message == "created on the cluster; waiting for Kueue"
    [made] = server.objects("jobsets", "jobset.x-k8s.io")
    assert stored.cluster_uid == made["metadata"]["uid"]


@pytest.mark.django_db(transaction=True)
def test_a_refused_create_is_not_retried(org: Org, server: FakeApiServer) -> None:
    invalid = (
        'JobSet.jobset.x-k8s.io "sft" is invalid: spec.replicatedJobs[0].replicas: '
        "Invalid value: 0: must be greater than or equal to 1"
    )
    server.fail_next("PATCH", JOBSET, 422, body=invalid)
    response = org.alice.post(URL, job(kind="JobSet", name="sft"), format="json")
    assert response.status_code == 201, response.content
    stored = JobRequest.objects.get(pk=response.json()["id"])
    assert (stored.state, stored.reason) == (JobState.REJECTED, "Invalid")
    assert stored.message == f"apply JobSet research/sft: 422 {invalid}"
    assert create_job.delay(stored.pk).get() == "skipped"
    assert applies(server) == 1


@pytest.mark.django_db(transaction=True)
def test_a_cancel_whose_delete_fails_for_now_answers_202_and_finishes_later(
    org: Org, server: FakeApiServer
) -> None:
    job_id = org.alice.post(URL, job(kind="JobSet", name="sft"), format="json").json()["id"]
    assert JobRequest.objects.get(pk=job_id).state == JobState.QUEUED
    a_minute_later(job_id)  # submitted a while ago; the cancel comes now
    server.fail_next("DELETE", JOBSET, 503)
    response = org.alice.delete(f"{URL}{job_id}/")
    assert response.status_code == 202, response.content
    stored = JobRequest.objects.get(pk=job_id)
    assert (stored.state, stored.reason) == (JobState.CANCELLING, "DeleteFailed")
    assert "delete JobSet sft: 503 injected failure" in stored.message
    assert sweep_jobs() == 0
    a_minute_later(job_id)
    assert sweep_jobs() == 1
    stored.refresh_from_db()
    assert stored.state == JobState.CANCELLED
    assert server.objects("jobsets", "jobset.x-k8s.io") == []


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_retries_with_backoff_and_rejects_at_the_cap(
    org: Org, server: FakeApiServer, settings: Any
) -> None:
    """On a real worker the task retries by itself (countdown, the server's
    Retry-After as a floor), with no sweeper, and the cap ends it."""
    settings.BERTH_JOB_CREATE_ATTEMPTS = 4
    server.fail_next("PATCH", JOBSET, 429, times=1)  # Retry-After: 1
    server.fail_next("PATCH", JOBSET, 503, times=10)
    with redis_worker():
        response = org.alice.post(URL, job(kind="JobSet", name="sft"), format="json")
        assert response.status_code == 201, response.content
        job_id = response.json()["id"]
        wait_until(
            lambda: JobRequest.objects.get(pk=job_id).state == JobState.REJECTED,
            "the worker to give up after four attempts",
        )
    stored = JobRequest.objects.get(pk=job_id)
    assert (stored.reason, stored.create_attempts) == ("CreateAttemptsExhausted", 4)
    assert stored.message.startswith("not created on the cluster after 4 attempts")
    assert stored.message.endswith("apply JobSet research/sft: 503 injected failure")
    assert applies(server) == 4


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_creates_the_job_once_the_cluster_answers_again(
    org: Org, server: FakeApiServer, settings: Any
) -> None:
    settings.BERTH_JOB_CREATE_ATTEMPTS = 20
    server.fail_next("PATCH", JOBSET, 503, times=2)
    with redis_worker():
        job_id = org.alice.post(URL, job(kind="JobSet", name="sft"), format="json").json()["id"]
        wait_until(
            lambda: JobRequest.objects.get(pk=job_id).state == JobState.QUEUED,
            "the worker to create the job on its third attempt",
        )
    assert JobRequest.objects.get(pk=job_id).create_attempts == 3
    assert applies(server) == 3


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "BERTH_JOB_CREATE_ATTEMPTS=0 is too small: it must be at least 1"),
        ("5000", "BERTH_JOB_CREATE_ATTEMPTS=5000 is too large: it must be at most 1000"),
        ("many", "BERTH_JOB_CREATE_ATTEMPTS='many' is not a whole number"),
    ],
)
def test_a_bad_cap_stops_start_up_naming_the_variable(
    tmp_path: Path, value: str, message: str
) -> None:
    env = clean_env(tmp_path, BERTH_JOB_CREATE_ATTEMPTS=value, BERTH_SECRET_KEY="k" * 40)
    result = run(["manage.py", "check"], env)
    assert result.returncode == 2
    assert result.stderr.startswith("berth: configuration error: ")
    assert message in result.stderr and "Traceback" not in result.stderr
