"""End to end on the simulated cluster: a submitted job is created, admitted,
runs and succeeds, with its timeline; a low-priority job preempted by a
higher-priority one shows the preemption, its requeue and the GPU-hours lost."""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils import timezone

from cluster.models import EventType, WorkloadRecord, WorkloadState
from cluster.sync import sync_workloads
from jobs.follow import follow_jobs
from jobs.models import JobRequest, JobState
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import URL, Cluster


def admitted_workload(
    queue: str, name: str, *, gpus: int, flavor: str, runtime: float | None = None
) -> WorkloadRecord:
    """A workload sync saw holding ``gpus`` GPUs of ``flavor`` in ``queue``."""
    return WorkloadRecord.objects.create(
        uid=f"uid-{name}",
        namespace=queue,
        name=name,
        cluster_queue=queue,
        local_queue=queue,
        requested={"nvidia.com/gpu": gpus},
        pod_sets=[{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": gpus}}],
        flavors={"main": {"nvidia.com/gpu": flavor}},
        state=WorkloadState.ADMITTED,
        created_at=timezone.now() - timedelta(minutes=5),
        admitted_at=timezone.now() - timedelta(minutes=5),
    )


def state(job_id: int) -> str:
    return JobRequest.objects.get(pk=job_id).state


def test_a_job_is_admitted_runs_and_succeeds_with_its_timeline(org: Org) -> None:
    cluster = Cluster()
    job_id = cluster.submit(org.alice, expected_runtime_seconds=600)
    assert state(job_id) == JobState.QUEUED
    t0 = time.time()
    cluster.at(t0)
    assert state(job_id) == JobState.RUNNING
    running = org.alice.get(f"{URL}{job_id}/").json()
    assert running["workload"] == "research/job-qwen-sft"
    assert running["flavors"] == {"main": {"nvidia.com/gpu": "h100"}}
    assert running["admitted_at"] is not None and running["wait_seconds"] is not None

    cluster.at(t0 + 11)  # 600 s of work at 60x
    done = JobRequest.objects.get(pk=job_id)
    assert done.state == JobState.SUCCEEDED and done.finished_at is not None
    assert done.preemptions == 0 and done.gpu_seconds_lost == 0
    assert done.gpu_seconds_used > 0
    types = [e["type"] for e in org.alice.get(f"{URL}{job_id}/events/").json()]
    assert types[:2] == ["submitted", "created-on-cluster"]
    assert [t for t in types if t in EventType.values] == [
        EventType.CREATED,
        EventType.QUOTA_RESERVED,
        EventType.ADMITTED,
        EventType.FINISHED,
    ]
    assert org.alice.get(f"{URL}{job_id}/explain/").json()["explanation"] is None


def test_a_preempted_job_is_requeued_and_counts_what_it_lost(org: Org) -> None:
    cluster = Cluster()
    low = cluster.submit(
        org.alice, name="sweep-low", priority_class="train-low", expected_runtime_seconds=36000
    )
    t0 = time.time()
    cluster.at(t0)
    assert state(low) == JobState.RUNNING
    high = cluster.submit(
        org.alice, name="release-high", priority_class="train-high", expected_runtime_seconds=600
    )
    cluster.at(t0 + 30)  # the high job's cycle evicts the low one
    assert state(low) in (JobState.PREEMPTED, JobState.QUEUED)
    cluster.at(t0 + 31)
    assert state(high) == JobState.RUNNING
    victim = JobRequest.objects.get(pk=low)
    assert victim.state == JobState.QUEUED  # requeued behind the high job
    assert victim.preemptions == 1
    # 30 s on 16 GPUs, no checkpoint within the 1800 s interval: all of it lost.
    assert 16 * 25 <= victim.gpu_seconds_lost <= 16 * 35
    events = [e["type"] for e in org.alice.get(f"{URL}{low}/events/").json()]
    assert EventType.PREEMPTED in events and EventType.REQUEUED in events
    preempted = next(
        e for e in org.alice.get(f"{URL}{low}/events/").json() if e["type"] == "preempted"
    )
    assert preempted["details"].get("preemptor") == "research/job-release-high"
    why = org.alice.get(f"{URL}{low}/explain/").json()
    assert why["state"] == "queued" and why["fits_now"] is False
    assert why["explanation"]["status"] == "pending"


def test_following_jobs_costs_the_same_queries_for_more_jobs(org: Org) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cluster = Cluster()
    t0 = time.time()

    def queries() -> int:
        # At one instant, settled first: a running job's GPU-seconds grow with
        # the clock, and writing them is not what this counts.
        moment = timezone.now()
        follow_jobs(cluster.backend, now=moment)
        with CaptureQueriesContext(connection) as captured:
            follow_jobs(cluster.backend, now=moment)
        return len(captured)

    cluster.submit(org.alice, name="one", queue="eval-batch", nodes=1)
    cluster.kueue.tick(t0)
    sync_workloads(cluster.backend)
    few = queries()
    for name in ("two", "three", "four"):
        cluster.submit(org.alice, name=name, queue="eval-batch", nodes=1)
    cluster.kueue.tick(t0 + 1)
    sync_workloads(cluster.backend)
    follow_jobs(cluster.backend)  # the new jobs' first update
    assert queries() <= few + 1  # unchanged jobs write nothing; reads do not grow per job
