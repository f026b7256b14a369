"""With the workload watch running, a job's state follows its Workload as the
watch sees it change, not at the next periodic sync."""

from __future__ import annotations

import time

from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.sync import watch_workloads
from jobs.follow import follow_jobs
from jobs.models import JobRequest, JobState
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster


def test_the_watch_brings_a_jobs_state_up_to_date(org: Org) -> None:
    cluster = Cluster()
    job_id = cluster.submit(org.alice)
    watch_workloads(cluster.backend, timeout_seconds=1, rounds=1)  # the watch is open
    assert JobRequest.objects.get(pk=job_id).state == JobState.QUEUED
    cluster.kueue.tick(time.time())  # Kueue admits it; no periodic sync runs
    watch_workloads(cluster.backend, timeout_seconds=1, rounds=1)
    assert JobRequest.objects.get(pk=job_id).state in (JobState.ADMITTED, JobState.RUNNING)


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
