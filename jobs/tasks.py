"""Celery tasks of the jobs app: create or delete the jobs teams submit, and
sweep up what a lost task left. Safe to repeat or overlap: creation recognises
the object it already made."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task

from cluster.retry import ClusterTask
from jobs.services import (
    create_on_cluster,
    delete_failed,
    delete_from_cluster,
    not_configured,
    queued_again,
    stuck_jobs,
)
from queues.backends import get_backend
from queues.backends.base import BackendError
from queues.deferred import send


@shared_task(name="jobs.tasks.create_job", base=ClusterTask, acks_late=True)
def create_job(job_id: int) -> str:
    """Create a submitted job on the cluster, exactly once however often it runs.
    The job is rejected when the cluster refuses it, is not configured, or
    attempts are spent; a transient error is retried (``ClusterTask``)."""
    try:
        backend = get_backend()
    except BackendError as exc:  # BERTH_CLUSTER=kubernetes with no configuration
        return not_configured(job_id, exc)
    return create_on_cluster(backend, job_id)


@shared_task(name="jobs.tasks.delete_job", base=ClusterTask, acks_late=True)
def delete_job(job_id: int) -> str:
    """Delete a cancelled job's objects from the cluster. A refused delete is
    said on the job (still ``cancelling``) and left to the sweeper; a transient
    error is retried (``ClusterTask``)."""
    try:
        backend = get_backend()
    except BackendError as exc:
        return delete_failed(job_id, exc)
    return delete_from_cluster(backend, job_id)


@shared_task(name="jobs.tasks.sweep_jobs", acks_late=True, ignore_result=True)
def sweep_jobs() -> int:
    """The intent lives in Postgres: re-queue creates and deletes that a lost
    task, a killed worker or spent retries left behind (none attempted in the
    last minute, or whose create could not be queued at all). Returns how
    many were queued."""
    creates, deletes = stuck_jobs(older_than=timedelta(seconds=60))
    queued = 0
    for job_id in creates:
        if send(create_job.name, job_id, stored=f"job {job_id}: swept"):
            queued_again(job_id)
            queued += 1
    for job_id in deletes:
        queued += send(delete_job.name, job_id, stored=f"job {job_id}: swept")
    return queued
