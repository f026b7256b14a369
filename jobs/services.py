"""Writes on job requests: submit, cancel, and the cluster side of both (create
exactly once, delete), which Celery tasks run. State changes are
compare-and-set on ``state``, so a retried or concurrent task changes nothing
twice."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from jobs.forecast import Forecast, forecast_new
from jobs.models import JobRequest, JobState
from jobs.submission import prepare
from queues.backends.base import TYPES, BackendError, ClusterBackend
from queues.errors import FieldError, PolicyConflict, PolicyInvalid

log = logging.getLogger(__name__)
REQUEST_ANNOTATION = "berth.dev/job-request"


def dry_run(actor: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Everything a submit would do and say, with nothing written."""
    prepared = prepare(actor, data)
    forecast: Forecast = forecast_new(prepared.candidate)
    return {
        "dry_run": True,
        "team": prepared.team.slug,
        "namespace": prepared.namespace,
        "local_queue": prepared.local_queue.name,
        "cluster_queue": prepared.cluster_queue.name,
        "queue_class": prepared.queue_class.name if prepared.queue_class else "",
        "priority_class": prepared.priority_class,
        "priority": prepared.priority,
        "manifest": prepared.manifest,
        **forecast.as_dict(),
    }


def submit(actor: Any, data: dict[str, Any]) -> JobRequest:
    """Store the checked request with its rendered manifest; the cluster object
    is created by a task after the commit."""
    prepared = prepare(actor, data)
    fields = prepared.fields()
    fields["justification"] = (data.get("justification") or "").strip()
    # The request id goes on the object, so a retried create recognises its own.
    try:
        with transaction.atomic():
            job = JobRequest.objects.create(
                **fields,
                submitted_by=actor if getattr(actor, "is_authenticated", False) else None,
                submitted_at=timezone.now(),
            )
            job.manifest = [_tagged(obj, job.pk) for obj in job.manifest]
            job.save(update_fields=["manifest"])
    except IntegrityError:
        raise PolicyInvalid(
            [
                FieldError(
                    "name",
                    "name-in-use",
                    f"a job named {fields['name']} is still live in {fields['namespace']}",
                )
            ]
        ) from None
    from jobs.tasks import create_job

    transaction.on_commit(lambda: create_job.delay(job.pk))
    return job


def _tagged(obj: dict[str, Any], job_id: int) -> dict[str, Any]:
    metadata = dict(obj.get("metadata", {}))
    metadata["annotations"] = {**metadata.get("annotations", {}), REQUEST_ANNOTATION: str(job_id)}
    return {**obj, "metadata": metadata}


def cancel(actor: Any, job: JobRequest) -> JobRequest:
    """Mark the job for deletion from the cluster; the record stays."""
    if job.is_terminal:
        raise PolicyConflict(f"job {job.name} has already ended ({job.state})", "job-ended")
    changed = (
        JobRequest.objects.filter(pk=job.pk, state=job.state)
        .exclude(state=JobState.CANCELLING)
        .update(state=JobState.CANCELLING, reason="Cancelled", message=f"cancelled by {actor}")
    )
    if not changed:
        job.refresh_from_db()
        if job.state == JobState.CANCELLING:
            return job
        raise PolicyConflict(f"job {job.name} changed meanwhile ({job.state}); retry", "stale")
    from jobs.tasks import delete_job

    transaction.on_commit(lambda: delete_job.delay(job.pk))
    job.refresh_from_db()
    return job


def _objects(job: JobRequest) -> list[dict[str, Any]]:
    return list(job.manifest)


def create_on_cluster(backend: ClusterBackend, job_id: int) -> str:
    """Create the job's objects once. A retry (or a second worker) finds the
    object it made, by the request id on it, and creates nothing more. Returns
    what happened: created, exists, skipped or rejected."""
    job = JobRequest.objects.filter(pk=job_id).first()
    if job is None or job.state != JobState.SUBMITTED:
        return "skipped"
    JobRequest.objects.filter(pk=job_id).update(create_attempts=F("create_attempts") + 1)
    main, *extra = _objects(job)
    rtype = TYPES[main["kind"]]
    existing = backend.get(rtype, main["metadata"]["name"], job.namespace)
    if existing is not None:
        owner = existing.get("metadata", {}).get("annotations", {}).get(REQUEST_ANNOTATION)
        if owner != str(job.pk):
            _reject(
                job,
                "NameTaken",
                f"{main['kind']} {main['metadata']['name']} already exists "
                "on the cluster and is not this job's",
            )
            return "rejected"
        _created(job, existing)
        return "exists"
    try:
        for obj in extra:  # e.g. the headless Service, before the pods need it
            backend.apply(obj, force=False)
        made = backend.apply(main, force=False)
    except BackendError as exc:
        if exc.transient:
            raise
        _reject(job, exc.reason or "Invalid", str(exc))
        return "rejected"
    _created(job, made)
    return "created"


def _created(job: JobRequest, obj: dict[str, Any]) -> None:
    moved = JobRequest.objects.filter(pk=job.pk, state=JobState.SUBMITTED).update(
        state=JobState.QUEUED,
        created_on_cluster_at=timezone.now(),
        cluster_uid=str(obj.get("metadata", {}).get("uid", "")),
        reason="Created",
        message="created on the cluster; waiting for Kueue",
    )
    if not moved:
        # Cancelled while being created: its delete may have found nothing yet,
        # so delete again now that the object exists.
        from jobs.tasks import delete_job

        transaction.on_commit(lambda: delete_job.delay(job.pk))


def _reject(job: JobRequest, reason: str, message: str) -> None:
    log.warning("job %s rejected by the cluster: %s", job, message)
    JobRequest.objects.filter(pk=job.pk, state=JobState.SUBMITTED).update(
        state=JobState.REJECTED, reason=reason[:64], message=message, finished_at=timezone.now()
    )


def delete_from_cluster(backend: ClusterBackend, job_id: int) -> str:
    """Delete a cancelled job's objects (already gone counts as done)."""
    job = JobRequest.objects.filter(pk=job_id).first()
    if job is None or job.state != JobState.CANCELLING:
        return "skipped"
    for obj in reversed(_objects(job)):
        backend.delete(TYPES[obj["kind"]], obj["metadata"]["name"], job.namespace)
    JobRequest.objects.filter(pk=job.pk, state=JobState.CANCELLING).update(
        state=JobState.CANCELLED, cancelled_at=timezone.now(), finished_at=timezone.now()
    )
    return "deleted"


def stuck_jobs(older_than: timedelta) -> tuple[list[int], list[int]]:
    """Jobs still waiting to be created, and to be deleted, after ``older_than``."""
    cutoff = timezone.now() - older_than
    creates = JobRequest.objects.filter(state=JobState.SUBMITTED, updated_at__lt=cutoff)
    deletes = JobRequest.objects.filter(state=JobState.CANCELLING, updated_at__lt=cutoff)
    return (
        list(creates.values_list("pk", flat=True)[:500]),
        list(deletes.values_list("pk", flat=True)[:500]),
    )
