"""Bulk history for the benchmarks: job requests with one Workload record each
and N events per workload (most long finished, a few hundred still pending or
running), written with bulk_create in batches and a progress line."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

LIVE = 300  # pending or running workloads the engine has to consider


def _progress(label: str, done: int, total: int) -> None:
    print(f"\r  {label}: {done:,}/{total:,}", end="" if done < total else "\n", flush=True)


def bulk_jobs(queues: list[Any], member: Any, jobs: int, events: int, seed: int = 7) -> None:
    """``queues``: LocalQueues (with namespace, team and cluster_queue loaded)
    to spread the jobs over, round robin."""
    from django.db import connection
    from django.utils import timezone

    from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
    from jobs.models import JobRequest, JobState

    rng = random.Random(seed)
    now = timezone.now()
    per_job = max(1, events // jobs)
    batch = 5000
    print(f"building {jobs:,} jobs, {jobs:,} workloads and {per_job * jobs:,} events")
    states = {
        WorkloadState.PENDING: JobState.QUEUED,
        WorkloadState.ADMITTED: JobState.RUNNING,
        WorkloadState.FINISHED: JobState.SUCCEEDED,
        WorkloadState.FAILED: JobState.FAILED,
    }
    kinds = [EventType.CREATED, EventType.QUOTA_RESERVED, EventType.ADMITTED]
    for start in range(0, jobs, batch):
        rows, records = [], []
        for i in range(start, min(jobs, start + batch)):
            queue = queues[i % len(queues)]
            live = i >= jobs - LIVE
            submitted = now - timedelta(seconds=(jobs - i) * 30)
            wstate = (
                rng.choice([WorkloadState.PENDING, WorkloadState.ADMITTED])
                if live
                else rng.choice([WorkloadState.FINISHED] * 9 + [WorkloadState.FAILED])
            )
            holds = wstate != WorkloadState.PENDING
            gpus = rng.choice([1, 2, 4, 8])
            records.append(
                WorkloadRecord(
                    uid=f"bench-{i}",
                    namespace=queue.namespace.name,
                    name=f"job-bench-{i}",
                    team=queue.namespace.team,
                    job_kind="Job",
                    job_name=f"bench-{i}",
                    local_queue=queue.name,
                    cluster_queue=queue.cluster_queue.name,
                    requested={"nvidia.com/gpu": gpus},
                    pod_sets=[{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": gpus}}],
                    flavors={"main": {"nvidia.com/gpu": "h100-ondemand"}} if holds else {},
                    state=wstate,
                    created_at=submitted,
                    admitted_at=submitted + timedelta(seconds=60) if holds else None,
                )
            )
            rows.append(
                JobRequest(
                    name=f"bench-{i}",
                    team=queue.namespace.team,
                    namespace=queue.namespace.name,
                    image="registry.example.com/trainer:1",
                    command=["python", "train.py"],
                    nodes=1,
                    gpus_per_node=gpus,
                    queue_class="training-large",
                    local_queue=queue.name,
                    cluster_queue=queue.cluster_queue.name,
                    checkpoint_uri="s3://bench/ckpt",
                    max_runtime_seconds=3600,
                    state=states[wstate],
                    submitted_at=submitted,
                    submitted_by=member,
                    manifest=[{"kind": "Job", "metadata": {"name": f"bench-{i}"}}],
                )
            )
        WorkloadRecord.objects.bulk_create(records)
        for row, record in zip(rows, records, strict=True):
            row.workload = record
        JobRequest.objects.bulk_create(rows)
        event_rows = [
            WorkloadEvent(
                workload=record,
                type=kinds[k % 3] if k < per_job - 1 else EventType.FINISHED,
                at=record.created_at + timedelta(seconds=k),
                reason=f"r{k}",
            )
            for record in records
            for k in range(per_job)
        ]
        WorkloadEvent.objects.bulk_create(event_rows, batch_size=batch)
        _progress("jobs", min(jobs, start + batch), jobs)
    # A database in service is vacuumed by autovacuum; counts then read the index only.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
