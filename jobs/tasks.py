"""Celery tasks: bring what the cluster did into Postgres, and create or delete
the jobs teams submit. Safe to repeat or overlap: sync upserts by uid and
events are unique, snapshots are keyed by their (second-rounded) time, and job
creation recognises the object it already made."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from celery import shared_task

from jobs.approvals.apply import apply_decision
from jobs.approvals.controller import drive_approvals as drive_approvals_once
from jobs.follow import follow_jobs
from jobs.forecast import refresh_pending_forecasts
from jobs.services import create_on_cluster, delete_from_cluster, stuck_jobs
from jobs.snapshots import snapshot_cluster, sync_queue_status
from jobs.sync import sync_workloads
from jobs.whatif import execute as execute_whatif
from queues.backends import get_backend
from queues.backends.base import BackendError


def backoff(retries: int) -> float:
    """Seconds before retry number ``retries`` + 1: doubling, with jitter."""
    return float(random.uniform(0.5, 1.0) * min(60.0, 2.0**retries))


@shared_task(name="jobs.tasks.sync_cluster", acks_late=True)
def sync_cluster() -> dict[str, int | str]:
    """List workloads into WorkloadRecord/WorkloadEvent, mirror queue status,
    then snapshot queue usage and node capacity. Returns the list's
    resourceVersion and row counts."""
    backend = get_backend()
    resource_version = sync_workloads(backend)
    statuses = sync_queue_status(backend)
    jobs = follow_jobs(backend)
    queues, capacity = snapshot_cluster(backend)
    forecasts = refresh_pending_forecasts()
    return {
        "forecasts": forecasts,
        "resource_version": resource_version,
        "queue_statuses": statuses,
        "jobs": jobs,
        "queues": queues,
        "capacity": capacity,
    }


@shared_task(name="jobs.tasks.create_job", bind=True, acks_late=True, max_retries=5)
def create_job(self: Any, job_id: int) -> str:
    """Create a submitted job on the cluster, exactly once however often it runs."""
    try:
        return create_on_cluster(get_backend(), job_id)
    except BackendError as exc:
        if not exc.transient:
            raise
        raise self.retry(exc=exc, countdown=backoff(self.request.retries)) from exc


@shared_task(name="jobs.tasks.delete_job", bind=True, acks_late=True, max_retries=5)
def delete_job(self: Any, job_id: int) -> str:
    """Delete a cancelled job's objects from the cluster."""
    try:
        return delete_from_cluster(get_backend(), job_id)
    except BackendError as exc:
        if not exc.transient:
            raise
        raise self.retry(exc=exc, countdown=backoff(self.request.retries)) from exc


@shared_task(name="jobs.tasks.sweep_jobs", acks_late=True, ignore_result=True)
def sweep_jobs() -> int:
    """The intent lives in Postgres: re-queue creates and deletes that a lost
    task or a killed worker left behind. Returns how many were queued."""
    creates, deletes = stuck_jobs(older_than=timedelta(seconds=60))
    for job_id in creates:
        create_job.delay(job_id)
    for job_id in deletes:
        delete_job.delay(job_id)
    return len(creates) + len(deletes)


@shared_task(name="jobs.tasks.run_whatif", acks_late=True)
def run_whatif(run_id: int) -> str:
    """Replay a what-if run's workloads under today's policy and the proposal;
    a run already claimed (a redelivery) is left alone."""
    return execute_whatif(run_id)


@shared_task(name="jobs.tasks.drive_approvals", acks_late=True)
def drive_approvals() -> dict[str, int]:
    """One approval controller pass: raise, notify, expire, re-drive decisions."""
    return drive_approvals_once(get_backend())


@shared_task(name="jobs.tasks.apply_approval", bind=True, acks_late=True, max_retries=5)
def apply_approval(self: Any, request_id: int) -> str:
    """Write one decision to its Workload (queued when it is taken); the
    periodic pass re-drives it if this task is lost."""
    try:
        return apply_decision(get_backend(), request_id)
    except BackendError as exc:
        if not exc.transient:
            raise
        raise self.retry(exc=exc, countdown=backoff(self.request.retries)) from exc
