"""Celery tasks of the jobs app: create or delete the jobs teams submit, and
sweep up what a lost task left. Safe to repeat or overlap: creation recognises
the object it already made."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import current_app, shared_task
from django.conf import settings
from kombu.exceptions import ChannelError

from cluster.retry import ClusterTask
from jobs.services import (
    create_on_cluster,
    delete_failed,
    delete_from_cluster,
    lost_creates,
    not_configured,
    queued_again,
    requeued_delete,
    stuck_jobs,
)
from queues.backends import get_backend
from queues.backends.base import BackendError
from queues.deferred import send

log = logging.getLogger(__name__)


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
    task, a killed worker or spent retries left behind. A create that could
    not be queued at all goes at once; one queued but taken up by no worker
    within ``BERTH_JOB_CREATE_REDRIVE_SECONDS``, or whose attempt has not
    finished that long after it began, goes then (once), while the
    queue is short (``BERTH_JOB_REDRIVE_QUEUE_LIMIT``: a longer one means it
    is probably waiting in line); anything else with no attempt and no re-queue
    in the last minute goes then. Creates are idempotent, so a duplicate
    message creates nothing more. Returns how many were queued."""
    creates, deletes = stuck_jobs(older_than=timedelta(seconds=60))
    lost = lost_creates(timedelta(seconds=settings.BERTH_JOB_CREATE_REDRIVE_SECONDS))
    for job_id in creates:
        lost.pop(job_id, None)
    if lost and not queue_is_short():
        lost = {}
    queued = 0
    for job_id in [*creates, *lost]:
        if send(create_job.name, job_id, stored=f"job {job_id}: swept"):
            queued_again(job_id, lost=lost.get(job_id))
            queued += 1
    for job_id in deletes:
        if send(delete_job.name, job_id, stored=f"job {job_id}: swept"):
            requeued_delete(job_id)
            queued += 1
    return queued


def waiting_messages() -> int | None:
    """Messages waiting in Berth's task queue; None when the broker cannot say
    (unreachable). Eager (embedded) tasks never wait."""
    if current_app.conf.task_always_eager:
        return 0
    name = current_app.conf.task_default_queue
    try:
        with current_app.connection_for_read() as connection:
            channel = connection.default_channel
            try:
                declared = channel.queue_declare(queue=name, passive=True)  # type: ignore[attr-defined]
                return int(declared.message_count)
            except ChannelError:  # no such queue (yet): nothing waits
                return 0
    except Exception:
        log.warning("the task queue's length is unknown; early re-drives wait", exc_info=True)
        return None


def queue_is_short() -> bool:
    waiting = waiting_messages()
    return waiting is not None and waiting < settings.BERTH_JOB_REDRIVE_QUEUE_LIMIT
