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
from jobs.services import (
    create_on_cluster,
    delete_failed,
    delete_from_cluster,
    enqueue,
    not_configured,
    stuck_jobs,
)
from jobs.sync_steps import run_sync
from jobs.whatif import execute as execute_whatif
from queues.backends import get_backend
from queues.backends.base import BackendError


def backoff(retries: int) -> float:
    """Seconds before retry number ``retries`` + 1: doubling, with jitter."""
    return float(random.uniform(0.5, 1.0) * min(60.0, 2.0**retries))


@shared_task(name="jobs.tasks.sync_cluster", acks_late=True)
def sync_cluster() -> dict[str, Any]:
    """List workloads into WorkloadRecord/WorkloadEvent, mirror queue status,
    follow the jobs, snapshot queue usage and node capacity, refresh the
    forecasts: each step on its own, so one that fails (a 403 listing JobSets)
    stops none of the others, and each step's health is recorded. Returns the
    list's resourceVersion and row counts, and ``errors`` by step if any failed."""
    return run_sync().as_dict()


def _retry_later(task: Any, exc: BackendError) -> str:
    """A transient cluster error: on a worker, retry with backoff (at least what
    the server's Retry-After asked, within a minute). Run eagerly (the embedded
    mode, inside a web request) nothing sleeps: the periodic sweep tries again,
    as it does once a worker's retries are spent; the job already says why."""
    if task.request.is_eager or task.request.retries >= task.max_retries:
        return "retrying"
    countdown = max(backoff(task.request.retries), min(60.0, exc.retry_after or 0.0))
    raise task.retry(exc=exc, countdown=countdown) from exc


@shared_task(name="jobs.tasks.create_job", bind=True, acks_late=True, max_retries=5)
def create_job(self: Any, job_id: int) -> str:
    """Create a submitted job on the cluster, exactly once however often it runs.
    Cluster errors end here: the job is rejected (refused, unconfigured cluster,
    attempts spent) or retried; none is raised to the caller."""
    try:
        backend = get_backend()
    except BackendError as exc:  # BERTH_CLUSTER=kubernetes with no configuration
        return not_configured(job_id, exc)
    try:
        return create_on_cluster(backend, job_id)
    except BackendError as exc:  # only transient ones get here
        return _retry_later(self, exc)


@shared_task(name="jobs.tasks.delete_job", bind=True, acks_late=True, max_retries=5)
def delete_job(self: Any, job_id: int) -> str:
    """Delete a cancelled job's objects from the cluster. A refused delete is
    said on the job (still ``cancelling``) and left to the sweeper."""
    try:
        backend = get_backend()
    except BackendError as exc:
        return delete_failed(job_id, exc)
    try:
        return delete_from_cluster(backend, job_id)
    except BackendError as exc:  # only transient ones get here
        return _retry_later(self, exc)


@shared_task(name="jobs.tasks.sweep_jobs", acks_late=True, ignore_result=True)
def sweep_jobs() -> int:
    """The intent lives in Postgres: re-queue creates and deletes that a lost
    task, a killed worker or spent retries left behind (none attempted in the
    last minute). Returns how many were queued."""
    creates, deletes = stuck_jobs(older_than=timedelta(seconds=60))
    for job_id in creates:
        enqueue(create_job, job_id)
    for job_id in deletes:
        enqueue(delete_job, job_id)
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
    periodic pass re-drives it if this task is lost or its write failed (the
    failure is on the request's audit trail)."""
    try:
        return apply_decision(get_backend(), request_id)
    except BackendError as exc:
        if exc.transient:
            return _retry_later(self, exc)
        if self.request.is_eager:  # inside the deciding request: it still answers
            return "failed"
        raise
