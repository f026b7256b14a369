"""Writes on job requests: submit, cancel, and the cluster side of both (create
exactly once, delete), which Celery tasks run. State changes are
compare-and-set on ``state``, so a retried or concurrent task changes nothing
twice.

A cluster error never leaves a job silently stuck: one the cluster will give
the same answer to (403, 404, 422, …) rejects the job with the server's words;
a transient one (429, 5xx, a timeout) is noted on the job and retried, up to
``BERTH_JOB_CREATE_ATTEMPTS`` attempts in all, after which the job is rejected
saying how many attempts failed and how the last one did. A delete that fails
is noted on the cancelling job and retried until it succeeds."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from cluster.forecast import Forecast, forecast_new
from jobs.models import JobRequest, JobState
from jobs.submission import prepare
from queues.backends.base import TYPES, BackendError, ClusterBackend
from queues.deferred import after_commit
from queues.errors import FieldError, PolicyConflict, PolicyInvalid

log = logging.getLogger(__name__)
REQUEST_ANNOTATION = "berth.dev/job-request"
# Queued by name after the commit (``jobs.tasks`` imports this module). If
# queueing fails, the request still answers what it did (201 for a submit, 202
# for a cancel) and the sweeper (``jobs.tasks.sweep_jobs``) queues it again.
CREATE_JOB = "jobs.tasks.create_job"
DELETE_JOB = "jobs.tasks.delete_job"


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
        # Its queue class gates admission on an approver (urgent-release): the
        # estimate is when quota frees up, not when it will run.
        "needs_approval": bool(prepared.queue_class and prepared.queue_class.requires_approval),
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
    after_commit(
        CREATE_JOB,
        job.pk,
        stored=f"job {job.pk}: stored",
        on_failure=lambda: _not_queued(job.pk),
    )
    # In the embedded mode the create has run by now (eagerly, in this request):
    # answer with what it did.
    job.refresh_from_db()
    return job


QUEUE_UNAVAILABLE = "TaskQueueUnavailable"


def _not_queued(job_id: int) -> None:
    """The job is stored but its create could not be queued (the broker is
    down): say so on the job; the sweeper queues it as soon as it can."""
    JobRequest.objects.filter(pk=job_id, state=JobState.SUBMITTED).update(
        reason=QUEUE_UNAVAILABLE,
        message=(
            "Stored. Its creation on the cluster could not be queued (Berth's task queue is "
            "unreachable); it is queued as soon as the queue answers again."
        ),
        updated_at=timezone.now(),
    )


CREATE_REQUEUED = "CreateRequeued"
CREATE_RETRYING = "CreateRetrying"


def queued_again(job_id: int, *, lost: int | None = None) -> None:
    """Its create was queued again by the sweeper, now: the next re-drive is
    counted from here (at most one message per job per wait, however long the
    workers are away). ``lost`` (the attempts it had made): its message was
    lost — no worker had taken it up, or the worker that took it stopped in
    the middle — which is said on the job, and it is re-driven early only this
    once. Compare-and-set: a worker that took it up meanwhile (an attempt
    made) wins."""
    now = timezone.now()
    rows = JobRequest.objects.filter(pk=job_id, state=JobState.SUBMITTED)
    if lost is not None:
        waited = settings.BERTH_JOB_CREATE_REDRIVE_SECONDS
        what = (
            f"no worker had taken up its creation {waited} s after it was queued"
            if lost == 0
            else f"its creation (attempt {lost}) had not finished {waited} s after it began"
        )
        rows.filter(create_attempts=lost).update(
            reason=CREATE_REQUEUED,
            message=(
                f"Queued again: {what} (the task was lost, say with a worker that "
                "stopped). It is created once however often it is queued."
            ),
            updated_at=now,
        )
    elif not rows.filter(reason=QUEUE_UNAVAILABLE).update(reason="", message="", updated_at=now):
        rows.update(updated_at=now)


def requeued_delete(job_id: int) -> None:
    """Its delete was queued again by the sweeper: the next one a minute from now."""
    JobRequest.objects.filter(pk=job_id, state=JobState.CANCELLING).update(
        updated_at=timezone.now()
    )


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
        .update(
            state=JobState.CANCELLING,
            reason="Cancelled",
            message=f"cancelled by {actor}",
            updated_at=timezone.now(),
        )
    )
    if not changed:
        job.refresh_from_db()
        if job.state == JobState.CANCELLING:
            return job
        raise PolicyConflict(f"job {job.name} changed meanwhile ({job.state}); retry", "stale")
    after_commit(DELETE_JOB, job.pk, stored=f"job {job.pk}: cancelled")
    job.refresh_from_db()
    return job


def _objects(job: JobRequest) -> list[dict[str, Any]]:
    return list(job.manifest)


def create_on_cluster(backend: ClusterBackend, job_id: int) -> str:
    """Create the job's objects once. A retry (or a second worker) finds the
    object it made, by the request id on it, and creates nothing more. Returns
    what happened: created, exists, skipped or rejected.

    Every cluster call is covered: an error the cluster will repeat (403, 404,
    422, a conflict with another owner's fields) rejects the job with the
    server's words; a transient one is noted on the job and raised for the
    caller to retry, until ``BERTH_JOB_CREATE_ATTEMPTS`` attempts have failed,
    when the job is rejected instead."""
    job = JobRequest.objects.filter(pk=job_id).first()
    if job is None or job.state != JobState.SUBMITTED:
        return "skipped"
    attempt = job.create_attempts + 1
    # updated_at marks the latest attempt: the sweeper leaves a job alone while
    # a task is still retrying it.
    JobRequest.objects.filter(pk=job_id).update(
        create_attempts=F("create_attempts") + 1, updated_at=timezone.now()
    )
    try:
        return _create(backend, job)
    except BackendError as exc:
        if not exc.transient:
            _reject(job, reason_of(exc), str(exc))
            return "rejected"
        limit = int(settings.BERTH_JOB_CREATE_ATTEMPTS)
        if attempt >= limit:
            _reject(
                job,
                "CreateAttemptsExhausted",
                f"not created on the cluster after {attempt} attempt{'s' if attempt != 1 else ''} "
                f"(BERTH_JOB_CREATE_ATTEMPTS={limit}); the last one failed: {exc}",
            )
            return "rejected"
        _note(
            job,
            JobState.SUBMITTED,
            CREATE_RETRYING,
            f"attempt {attempt} of {limit} to create it on the cluster failed; "
            f"Berth tries again: {exc}",
        )
        raise


def _create(backend: ClusterBackend, job: JobRequest) -> str:
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
    for obj in extra:  # e.g. the headless Service, before the pods need it
        backend.apply(obj, force=False)
    made = backend.apply(main, force=False)
    _created(job, made)
    return "created"


# The reason a Kubernetes Status carries for each code, for errors that came
# without one (the simulated cluster's, or a proxy's bare answer).
STATUS_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_of(exc: BackendError) -> str:
    """The server's reason (``Forbidden``, ``Invalid``, …), else one named
    after the HTTP status, else ``ClusterError``."""
    return exc.reason or STATUS_REASONS.get(exc.status or 0, "ClusterError")


def not_configured(job_id: int, exc: BackendError) -> str:
    """Berth has no cluster it can talk to (``BERTH_CLUSTER=kubernetes`` without
    a kubeconfig or in-cluster config): nothing can be created until an operator
    fixes the configuration and restarts Berth, so the job is rejected now,
    saying so, rather than waiting for attempts that cannot succeed."""
    job = JobRequest.objects.filter(pk=job_id).first()
    if job is None or job.state != JobState.SUBMITTED:
        return "skipped"
    JobRequest.objects.filter(pk=job_id).update(
        create_attempts=F("create_attempts") + 1, updated_at=timezone.now()
    )
    _reject(job, "ClusterNotConfigured", f"Berth cannot reach its cluster: {exc}")
    return "rejected"


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
        after_commit(DELETE_JOB, job.pk, stored=f"job {job.pk}: cancelled")


def _reject(job: JobRequest, reason: str, message: str) -> None:
    log.warning("job %s rejected: %s: %s", job, reason, message)
    now = timezone.now()
    JobRequest.objects.filter(pk=job.pk, state=JobState.SUBMITTED).update(
        state=JobState.REJECTED,
        reason=reason[:64],
        message=message,
        finished_at=now,
        updated_at=now,
    )


def _note(job: JobRequest, state: JobState, reason: str, message: str) -> None:
    """Say on the job why it is still in ``state`` (a failed attempt)."""
    log.warning("job %s: %s", job, message)
    JobRequest.objects.filter(pk=job.pk, state=state).update(
        reason=reason[:64], message=message, updated_at=timezone.now()
    )


def delete_from_cluster(backend: ClusterBackend, job_id: int) -> str:
    """Delete a cancelled job's objects (already gone counts as done). A delete
    the cluster refuses is said on the job, which stays ``cancelling`` (its
    object may still hold GPUs) and is retried by the sweeper every minute, so it
    completes once the cluster allows it or someone deletes the object; transient
    errors are raised for the caller to retry sooner. Returns deleted, skipped
    or refused."""
    job = JobRequest.objects.filter(pk=job_id).first()
    if job is None or job.state != JobState.CANCELLING:
        return "skipped"
    JobRequest.objects.filter(pk=job_id).update(updated_at=timezone.now())
    try:
        for obj in reversed(_objects(job)):
            backend.delete(TYPES[obj["kind"]], obj["metadata"]["name"], job.namespace)
    except BackendError as exc:
        delete_failed(job, exc)
        if exc.transient:
            raise
        return "refused"
    now = timezone.now()
    JobRequest.objects.filter(pk=job.pk, state=JobState.CANCELLING).update(
        state=JobState.CANCELLED, cancelled_at=now, finished_at=now, updated_at=now
    )
    return "deleted"


def delete_failed(job: JobRequest | int, exc: BackendError) -> str:
    """Say on a cancelling job that its delete failed, and why."""
    if isinstance(job, int):
        found = JobRequest.objects.filter(pk=job).first()
        if found is None or found.state != JobState.CANCELLING:
            return "skipped"
        job = found
    _note(
        job,
        JobState.CANCELLING,
        "DeleteFailed",
        f"cancelled, but deleting it from the cluster failed; Berth tries again: {exc}",
    )
    return "refused"


def stuck_jobs(older_than: timedelta) -> tuple[list[int], list[int]]:
    """Jobs still waiting to be created, and to be deleted, after ``older_than``
    since the last attempt or the last time the sweeper queued them."""
    cutoff = timezone.now() - older_than
    # A create that could not be queued at all goes at once, whatever its age.
    creates = JobRequest.objects.filter(
        Q(updated_at__lt=cutoff) | Q(reason=QUEUE_UNAVAILABLE), state=JobState.SUBMITTED
    )
    deletes = JobRequest.objects.filter(state=JobState.CANCELLING, updated_at__lt=cutoff)
    return (
        list(creates.values_list("pk", flat=True)[:500]),
        list(deletes.values_list("pk", flat=True)[:500]),
    )


def lost_creates(after: timedelta) -> dict[int, int]:
    """Creates whose message looks lost, by job id with the attempts made:
    queued more than ``after`` ago and taken up by no worker (no attempt made:
    an attempt's first step counts it), or taken up more than ``after`` ago by
    an attempt that neither finished nor said it would retry (its worker was
    killed in the middle: a create takes well under a second). Not yet
    re-driven for that. With a short queue such a message is lost, not
    waiting: a worker killed after taking it holds it unacknowledged, and
    Redis hands it out again only after its visibility timeout (hours)."""
    return dict(
        JobRequest.objects.filter(state=JobState.SUBMITTED, updated_at__lt=timezone.now() - after)
        .exclude(reason__in=[QUEUE_UNAVAILABLE, CREATE_REQUEUED, CREATE_RETRYING])
        .values_list("pk", "create_attempts")[:500]
    )
