"""Cancelling a job takes its Workload off the simulated cluster, as the
garbage collector does on a real one: the quota it held or the place it had in
line is free at once, and it never runs on. Berth keeps its history: the job
request, the workload's record (marked deleted by sync) and its events."""

from __future__ import annotations

import time
from typing import Any

from cluster.models import EventType, WorkloadRecord, WorkloadState
from jobs.models import JobRequest, JobState
from queues.backends.base import TYPES
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import URL, Cluster


def state(job_id: int) -> str:
    return JobRequest.objects.get(pk=job_id).state


def cancel(org: Org, job_id: int, capture: Any) -> None:
    # The delete task runs after the commit, as a worker would run it.
    with capture(execute=True):
        response = org.alice.delete(f"{URL}{job_id}/")
    assert response.status_code == 202, response.content
    assert state(job_id) == JobState.CANCELLED


def workloads(cluster: Cluster) -> set[str]:
    return {w["metadata"]["name"] for w in cluster.backend.list(TYPES["Workload"])[0]}


def gpus_reserved(cluster: Cluster, queue: str) -> str:
    obj = cluster.backend.get(TYPES["ClusterQueue"], queue)
    assert obj is not None
    for flavor in obj["status"]["flavorsReservation"]:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                return str(resource["total"])
    return "0"


def history(job_id: int) -> tuple[WorkloadRecord, list[str]]:
    job = JobRequest.objects.get(pk=job_id)
    assert job.workload is not None, "the job lost its workload's record"
    record = WorkloadRecord.objects.get(pk=job.workload.pk)
    return record, list(record.events.order_by("at", "id").values_list("type", flat=True))


def test_a_cancelled_job_at_the_head_of_a_strict_fifo_line_frees_the_line(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    """research's training-large queue is StrictFIFO: a 3x8-GPU job that does
    not fit blocks the jobs behind it until it is cancelled."""
    cluster = Cluster()
    t0 = time.time()
    running = cluster.submit(org.alice, name="running", nodes=2, expected_runtime_seconds=3600)
    cluster.at(t0)
    big = cluster.submit(org.alice, name="big", nodes=3, expected_runtime_seconds=3600)
    cluster.at(t0 + 1)
    small = cluster.submit(org.alice, name="small", nodes=1, expected_runtime_seconds=3600)
    cluster.at(t0 + 2)
    assert state(running) == JobState.RUNNING
    assert (state(big), state(small)) == (JobState.QUEUED, JobState.QUEUED)

    cancel(org, big, django_capture_on_commit_callbacks)
    assert "job-big" not in workloads(cluster)  # gone with its job
    cluster.at(t0 + 3)
    assert state(small) == JobState.RUNNING  # the line moved on the next step
    assert state(big) == JobState.CANCELLED

    record, events = history(big)
    assert record.state == WorkloadState.DELETED
    assert events[0] == EventType.CREATED and events[-1] == EventType.DELETED
    assert EventType.ADMITTED not in events
    timeline = [e["type"] for e in org.alice.get(f"{URL}{big}/events/").json()]
    assert "submitted" in timeline and EventType.DELETED in timeline


def test_a_cancelled_admitted_job_frees_its_quota_at_once_and_never_succeeds(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    cluster = Cluster()
    t0 = time.time()
    first = cluster.submit(org.alice, name="first", nodes=2, expected_runtime_seconds=600)
    cluster.at(t0)
    assert state(first) == JobState.RUNNING
    assert gpus_reserved(cluster, "research") == "16"

    cancel(org, first, django_capture_on_commit_callbacks)
    assert workloads(cluster) == set()
    # The next job gets the whole nominal quota on the very next step.
    second = cluster.submit(org.alice, name="second", nodes=2, expected_runtime_seconds=3600)
    cluster.at(t0 + 1)
    assert state(second) == JobState.RUNNING
    assert gpus_reserved(cluster, "research") == "16"

    # Well past the cancelled job's 600 s of work (10 s at 60x): it never ran on.
    cluster.at(t0 + 30)
    cancelled = JobRequest.objects.get(pk=first)
    assert cancelled.state == JobState.CANCELLED
    record, events = history(first)
    assert record.state == WorkloadState.DELETED
    assert record.finished_at is None
    assert EventType.ADMITTED in events and events[-1] == EventType.DELETED
    assert EventType.FINISHED not in events
    assert [w for w in workloads(cluster) if "first" in w] == []
