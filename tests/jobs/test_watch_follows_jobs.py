"""With the workload watch running, a job's state follows its Workload as the
watch sees it change, not at the next periodic sync."""

from __future__ import annotations

import time

from cluster.sync import watch_workloads
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
