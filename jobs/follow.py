"""Job requests follow what sync recorded: their Workload's state and
timeline, and the job object's own status (running, succeeded, failed).

Figures come from the timeline: wait is submitted → first admitted; each
admitted stretch uses GPUs; a stretch ended by an eviction loses the work
since its last checkpoint (all of it without checkpoints)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from jobs.models import JobRequest, JobState
from jobs.models.requests import TERMINAL_STATES
from queues.backends.base import TYPES, BackendError, ClusterBackend
from queues.display import kueue_text

log = logging.getLogger(__name__)
MANAGED = "app.kubernetes.io/managed-by=berth"
JOB_TYPES = ("Job", "JobSet", "PyTorchJob", "TrainJob")
_WORKLOAD_STATES = {
    WorkloadState.PENDING: JobState.QUEUED,
    WorkloadState.QUOTA_RESERVED: JobState.QUOTA_RESERVED,
    WorkloadState.ADMITTED: JobState.ADMITTED,
    WorkloadState.EVICTED: JobState.PREEMPTED,
    WorkloadState.FINISHED: JobState.SUCCEEDED,
    WorkloadState.FAILED: JobState.FAILED,
    WorkloadState.DEACTIVATED: JobState.FAILED,
}


def _true(obj: Mapping[str, Any], *types: str) -> bool:
    return any(
        c.get("type") in types and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions", [])
    )


def job_phase(obj: Mapping[str, Any]) -> str:
    """running, succeeded, failed or "" (not started / suspended), from the
    status each kind's controller keeps."""
    status = obj.get("status") or {}
    if _true(obj, "Complete", "Completed", "Succeeded"):
        return "succeeded"
    if _true(obj, "Failed"):
        return "failed"
    if (status.get("active") or 0) > 0 or _true(obj, "Running"):
        return "running"
    if any((r.get("active") or 0) > 0 for r in status.get("replicatedJobsStatus") or []):
        return "running"
    spec = obj.get("spec") or {}
    suspended = spec.get("suspend", (spec.get("runPolicy") or {}).get("suspend"))
    # Kueue unsuspends a job only once admitted; its pods start right after.
    if suspended is False:
        return "running"
    return ""


def _segments(events: Iterable[tuple[str, datetime]], now: datetime) -> list[tuple[float, bool]]:
    """(seconds admitted, ended by eviction) per admitted stretch."""
    segments: list[tuple[float, bool]] = []
    start: datetime | None = None
    for kind, at in events:
        if kind == EventType.ADMITTED and start is None:
            start = at
        elif kind in (EventType.EVICTED, EventType.PREEMPTED) and start is not None:
            segments.append((max(0.0, (at - start).total_seconds()), True))
            start = None
        elif (
            kind in (EventType.FINISHED, EventType.FAILED, EventType.DELETED) and start is not None
        ):
            segments.append((max(0.0, (at - start).total_seconds()), False))
            start = None
    if start is not None:
        segments.append((max(0.0, (now - start).total_seconds()), False))
    return segments


def figures(
    job: JobRequest,
    record: WorkloadRecord,
    now: datetime,
    events: list[tuple[str, datetime]] | None = None,
) -> dict[str, Any]:
    """admitted_at, preemptions, GPU-seconds used and lost, from the timeline
    (``events``: the record's (type, at) in time order, if already read)."""
    if events is None:
        events = list(record.events.order_by("at", "id").values_list("type", "at"))
    admitted = [at for kind, at in events if kind == EventType.ADMITTED]
    segments = _segments(events, now)
    interval = job.checkpoint_interval
    lost = 0.0
    for seconds, evicted in segments:
        if evicted:
            lost += seconds % interval if interval else seconds
    return {
        "admitted_at": min(admitted) if admitted else None,
        "preemptions": sum(1 for _, evicted in segments if evicted),
        "gpu_seconds_used": round(sum(s for s, _ in segments) * job.gpus, 3),
        "gpu_seconds_lost": round(lost * job.gpus, 3),
    }


def _state(job: JobRequest, record: WorkloadRecord | None, phase: str, gone: bool) -> JobState:
    if phase == "succeeded":
        return JobState.SUCCEEDED
    if phase == "failed":
        return JobState.FAILED
    if record is None:
        return JobState.FAILED if gone else JobState(job.state)
    state = _WORKLOAD_STATES.get(WorkloadState(record.state))
    if record.state == WorkloadState.DELETED:
        return JobState.FAILED if gone else JobState(job.state)
    if state == JobState.ADMITTED and phase == "running":
        return JobState.RUNNING
    if record.state == WorkloadState.DEACTIVATED and _refused(record):
        return JobState.REJECTED
    return state or JobState(job.state)


# Whether a deactivated workload was refused by whoever gates admission
# (approvals registers at start-up: it sits above jobs, which may not import it).
RefusalCheck = Callable[[WorkloadRecord], bool]
_refusal_checks: list[RefusalCheck] = []


def register_refusal_check(check: RefusalCheck) -> None:
    if check not in _refusal_checks:
        _refusal_checks.append(check)


def _refused(record: WorkloadRecord) -> bool:
    return any(check(record) for check in _refusal_checks)


def sync_step(backend: Callable[[], ClusterBackend]) -> dict[str, Any]:
    """The sync's ``jobs`` step (registered with ``cluster.sync_steps``)."""
    return {"jobs": follow_jobs(backend())}


def _job_objects(
    backend: ClusterBackend,
) -> tuple[dict[tuple[str, str, str], dict[str, Any]], dict[str, BackendError]]:
    """Berth's job objects by (kind, namespace, name), and the kinds that could
    not be listed, with the error each got."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    unseen: dict[str, BackendError] = {}
    for kind in JOB_TYPES:
        try:
            items, _ = backend.list(TYPES[kind], label_selector=MANAGED)
        except BackendError as exc:
            if exc.status != 404:
                unseen[kind] = exc
            # A 404: the cluster does not serve this kind (its CRD is not
            # installed), so none of its objects exists.
            continue
        for obj in items:
            metadata = obj.get("metadata", {})
            found[(kind, metadata.get("namespace", ""), metadata.get("name", ""))] = obj
    return found, unseen


def follow_changed(backend: ClusterBackend, changed: set[tuple[str, str, str]]) -> int:
    """The watch's follower: the jobs (namespace, kind, name) whose Workloads
    just changed, brought up to date now rather than at the next sync."""
    return follow_jobs(backend, only=changed)


def follow_jobs(
    backend: ClusterBackend,
    now: datetime | None = None,
    *,
    only: set[tuple[str, str, str]] | None = None,
) -> int:
    """Bring every live job request (or ``only`` those, by namespace, kind and
    name) up to date; returns how many changed.

    A kind the cluster would not list (a 403, a timeout) is not the same as
    gone: its jobs follow their Workloads only, keep ``running`` without their
    object to confirm it, and are never marked failed for a missing object. The
    other kinds are followed in full; then the listing error is raised, so the
    sync step says what failed."""
    now = now or timezone.now()
    live = list(
        JobRequest.objects.exclude(state__in=TERMINAL_STATES)
        .exclude(state__in=[JobState.SUBMITTED, JobState.CANCELLING])
        # What following never reads: the rendered objects and the submitted
        # spec, decoded from JSON for every live job on every sync otherwise.
        .defer("manifest", "command", "env", "labels", "justification")
    )
    if only is not None:
        live = [job for job in live if (job.namespace, job.kind, job.name) in only]
    if not live:
        return 0
    objects, unseen = _job_objects(backend)
    wanted = Q()
    for job in live:
        wanted |= Q(namespace=job.namespace, job_kind=job.kind, job_name=job.name)
    records: dict[tuple[str, str, str], WorkloadRecord] = {}
    for row in WorkloadRecord.objects.filter(wanted).order_by("created_at", "id"):
        records[(row.job_kind, row.namespace, row.job_name)] = row  # newest wins
    # Every followed workload's timeline in one query, not one per job per sync.
    timelines: dict[int, list[tuple[str, datetime]]] = {r.pk: [] for r in records.values()}
    for workload_id, kind, at in (
        WorkloadEvent.objects.filter(workload_id__in=list(timelines))
        .order_by("at", "id")
        .values_list("workload_id", "type", "at")
    ):
        timelines[workload_id].append((kind, at))
    changed = 0
    for job in live:
        key = (job.kind, job.namespace, job.name)
        obj = objects.get(key)
        record: WorkloadRecord | None = records.get(key)
        if (
            record is not None
            and job.created_on_cluster_at
            and record.created_at < (job.created_on_cluster_at - timedelta(minutes=5))
        ):
            record = None  # an older job's workload under the same name
        phase = job_phase(obj) if obj is not None else ""
        seen = job.kind not in unseen
        state = _state(job, record, phase, gone=seen and obj is None)
        if not seen and state == JobState.ADMITTED and job.state == JobState.RUNNING:
            state = JobState.RUNNING  # its object's status is what says it runs
        update: dict[str, Any] = {"state": state}
        if record is not None:
            update |= figures(job, record, now, timelines.get(record.pk))
            update["workload_id"] = record.pk
            update["reason"] = record.reason[:64]
            update["message"] = kueue_text(record.message)
        if state == JobState.RUNNING and job.started_at is None:
            update["started_at"] = now
        if state in TERMINAL_STATES and job.finished_at is None:
            update["finished_at"] = (record.finished_at if record else None) or now
        if obj is None and state == JobState.FAILED and record is None:
            update["reason"], update["message"] = "Deleted", "the job is gone from the cluster"
        if all(getattr(job, k) == v for k, v in update.items()):
            continue
        # Compare-and-set: a cancel that landed meanwhile wins.
        changed += JobRequest.objects.filter(pk=job.pk, state=job.state).update(**update)
    if unseen:
        first = next(iter(unseen.values()))
        raise BackendError(
            "; ".join(str(exc) for exc in unseen.values()),
            status=first.status,
            reason=first.reason,
            transient=all(exc.transient for exc in unseen.values()),
        )
    return changed
