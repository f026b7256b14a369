"""With the workload watch running, a job's state follows its Workload as the
watch sees it change, not at the next periodic sync: the last change of a
burst too, while the watch waits for events that may be minutes away."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.sync import watch_workloads
from jobs.follow import follow_jobs
from jobs.models import JobRequest, JobState
from tests.celery_broker import wait_until
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster


@pytest.mark.django_db(transaction=True)  # a follow may run on the watch's own thread
def test_the_watch_brings_a_jobs_state_up_to_date(org: Org) -> None:
    cluster = Cluster()
    job_id = cluster.submit(org.alice)
    watch_workloads(cluster.backend, timeout_seconds=1, rounds=1)  # the watch is open
    assert JobRequest.objects.get(pk=job_id).state == JobState.QUEUED
    cluster.kueue.tick(time.time())  # Kueue admits it; no periodic sync runs
    watch_workloads(cluster.backend, timeout_seconds=1, rounds=1)
    assert JobRequest.objects.get(pk=job_id).state in (JobState.ADMITTED, JobState.RUNNING)


@pytest.mark.django_db(transaction=True)
def test_the_last_change_of_a_burst_is_followed_while_the_watch_stays_open(org: Org) -> None:
    cluster = Cluster()
    job_id = cluster.submit(org.alice)
    watch_workloads(cluster.backend, timeout_seconds=1, rounds=1)  # where the watch resumes
    ended = threading.Event()

    def watch() -> None:  # one long watch request, as sync_watch makes them
        try:
            watch_workloads(cluster.backend, timeout_seconds=20, rounds=1)
        finally:
            connection.close()
            ended.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    # Kueue makes the Workload and admits it at once: a burst, then quiet.
    cluster.kueue.tick(time.time())
    wait_until(
        lambda: JobRequest.objects.get(pk=job_id).state in (JobState.ADMITTED, JobState.RUNNING),
        "the job's state to follow its admission",
    )
    assert not ended.is_set()  # followed while the watch waits on, not when it ends
    watcher.join(60)


def test_following_jobs_reads_no_job_spec(org: Org) -> None:
    """A sync follows every live job: their rendered objects and submitted
    specs (large JSON) are not read, and not one query per job either."""
    cluster = Cluster()
    for name in ("spec-a", "spec-b", "spec-c"):
        cluster.submit(org.alice, name=name)
    cluster.at(time.time())  # admitted, synced, followed
    with CaptureQueriesContext(connection) as queries:
        follow_jobs(cluster.backend)  # the next sync's
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "jobs_jobrequest"' in q["sql"]]
    assert len(reads) == 1
    assert '"manifest"' not in reads[0] and '"env"' not in reads[0]
    assert JobRequest.objects.filter(state__in=[JobState.ADMITTED, JobState.RUNNING]).exists()
