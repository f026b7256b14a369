"""The controller's view of requests over time. A request answers one quota
reservation: one is raised when Kueue reserves quota for a Workload and sets
the check Pending; a workload evicted and back within the grace window after
an approval is re-approved; a pending request whose workload lost that
reservation (or whose job was cancelled) is withdrawn, and the requester and
the people it reached are told why; one nobody decided in time expires. Each
step reads what sync recorded and is safe to run twice or concurrently (unique
constraints, compare-and-set)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from approvals.audit import record
from approvals.decide import expire
from approvals.impact import impact_preview
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from approvals.notify import notify_withdrawn
from approvals.reservation import holds, why_withdrawn
from approvals.status import CHECK_NAME
from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from cluster.state import ClusterState, cluster_state
from jobs.models import JobRequest, JobState
from queues.models import ClusterQueue

log = logging.getLogger(__name__)


def gated_queues() -> list[str]:
    """ClusterQueues whose class requires approval (they carry the check)."""
    return list(
        ClusterQueue.objects.filter(queue_class__requires_approval=True).values_list(
            "name", flat=True
        )
    )


def waiting_for_approval() -> Iterator[WorkloadRecord]:
    """Reserved workloads in gated queues whose check sync saw Pending."""
    return (
        WorkloadRecord.objects.filter(
            cluster_queue__in=gated_queues(), state=WorkloadState.QUOTA_RESERVED
        )
        .filter(**{f"admission_checks__{CHECK_NAME}__state": "Pending"})
        .select_related("team")
        .order_by("created_at", "id")
        .iterator()
    )


def _job_of(record: WorkloadRecord) -> JobRequest | None:
    return (
        JobRequest.objects.filter(
            namespace=record.namespace, kind=record.job_kind, name=record.job_name
        )
        .select_related("submitted_by")
        .order_by("-submitted_at")
        .first()
    )


class _EngineView:
    """The engine's view of the cluster, built once per pass when first needed."""

    def __init__(self) -> None:
        self._state: ClusterState | None = None

    def state(self, now: datetime) -> ClusterState:
        if self._state is None:
            self._state = cluster_state(now)
        return self._state


def _create(
    workload: WorkloadRecord,
    now: datetime,
    *,
    attempt: int,
    reapproval_of: ApprovalRequest | None = None,
    rejected_by: ApprovalRequest | None = None,
    engine: _EngineView | None = None,
) -> ApprovalRequest | None:
    """The next request for ``workload``; None if another controller made it."""
    job = _job_of(workload)
    if job is not None and job.state in (JobState.CANCELLING, JobState.CANCELLED):
        return None  # being deleted: nobody should be asked
    fields = {
        "workload_uid": workload.uid,
        "namespace": workload.namespace,
        "workload_name": workload.name,
        "cluster_queue": workload.cluster_queue,
        "local_queue": workload.local_queue,
        "attempt": attempt,
        "job": job,
        "team": workload.team,
        "requester": job.submitted_by if job else None,
        "requested": workload.requested,
        "gpus": workload.gpus,
        "priority": workload.priority,
        "priority_class": workload.priority_class,
        "justification": job.justification if job else "",
        "reserved_at": workload.reserved_at,
        "created_at": now,
        "expires_at": now + timedelta(seconds=settings.BERTH_APPROVAL_TIMEOUT),
    }
    if reapproval_of is not None:
        minutes = settings.BERTH_APPROVAL_GRACE // 60
        fields |= {
            "state": ApprovalState.APPROVED,
            "decided_at": now,
            "reapproval_of": reapproval_of,
            "impact": reapproval_of.impact,
            "comment": f"back within the {minutes}-minute grace window after its eviction; "
            f"approval #{reapproval_of.pk} stands",
        }
    elif rejected_by is not None:
        fields |= _carried_rejection(rejected_by, now)
    else:
        fields["impact"] = impact_preview(
            workload, now, engine.state(now) if engine is not None else None
        )
    try:
        with transaction.atomic():
            request = ApprovalRequest.objects.create(**fields)
            if reapproval_of is not None:
                record(request, ApprovalAction.REAPPROVED, message=fields["comment"], at=now)
            elif rejected_by is not None:
                actor = rejected_by.decided_by
                record(
                    request, ApprovalAction.REJECTED, actor=actor, message=fields["comment"], at=now
                )
            else:
                record(
                    request,
                    ApprovalAction.REQUESTED,
                    actor=fields["requester"],
                    message=fields["impact"]["summary"],
                    at=now,
                )
    except IntegrityError:
        return None  # raised a moment ago by another pass
    return request


def _carried_rejection(rejected: ApprovalRequest, now: datetime) -> dict[str, Any]:
    """A person's rejection that never reached the Workload (its reservation
    ended first) stands for the next one: they said no to this job, and an
    approver asked again might say yes to what they refused."""
    who = rejected.decided_by.get_username() if rejected.decided_by else "an approver"
    return {
        "state": ApprovalState.REJECTED,
        "decided_at": now,
        "decided_by": rejected.decided_by,
        "impact": rejected.impact,
        "comment": f"{rejected.comment} (rejection #{rejected.pk} by {who}, made for the "
        "reservation before, which ended before it was written, stands)",
    }


def _unwritten_rejection(request: ApprovalRequest) -> bool:
    """A person's rejection not written to the reservation it answered: the
    caller has seen the workload hold another one, so it never will be."""
    return (
        request.state == ApprovalState.REJECTED
        and request.decided_by_id is not None
        and not request.written
    )


def _evicted_at(workload: WorkloadRecord, since: datetime | None) -> datetime | None:
    """When the workload last lost its quota after ``since`` (sync's event)."""
    events = WorkloadEvent.objects.filter(
        workload=workload, type__in=[EventType.EVICTED, EventType.PREEMPTED]
    )
    if since is not None:
        events = events.filter(at__gte=since)
    return events.order_by("-at").values_list("at", flat=True).first()


def raise_requests(now: datetime) -> tuple[list[ApprovalRequest], list[ApprovalRequest]]:
    """(new pending requests to notify about, re-decided ones to apply: an
    approval back within its grace window, a rejection that was never written).

    One request per reservation: a reservation a request already answers (or
    is still answering) raises nothing, whatever the mirror says of the check
    (sync may not have seen the decision's write yet). A new reservation after
    an eviction raises the next attempt, re-approved when the workload was
    approved and came back within the grace window."""
    raised: list[ApprovalRequest] = []
    reapproved: list[ApprovalRequest] = []
    engine = _EngineView()
    for workload in waiting_for_approval():
        latest = (
            ApprovalRequest.objects.filter(workload_uid=workload.uid).order_by("-attempt").first()
        )
        if latest is None:
            if created := _create(workload, now, attempt=1, engine=engine):
                raised.append(created)
            continue
        if latest.state == ApprovalState.PENDING or latest.reserved_at == workload.reserved_at:
            continue
        if _unwritten_rejection(latest):
            carried = _create(workload, now, attempt=latest.attempt + 1, rejected_by=latest)
            if carried:
                reapproved.append(carried)  # decided by the controller: to write
            continue
        if latest.state == ApprovalState.APPROVED and workload.reserved_at is not None:
            evicted = _evicted_at(workload, latest.reserved_at) or latest.decided_at
            away = (workload.reserved_at - evicted).total_seconds() if evicted else None
            if away is not None and away <= settings.BERTH_APPROVAL_GRACE:
                origin = latest.reapproval_of or latest
                if created := _create(
                    workload,
                    now,
                    attempt=latest.attempt + 1,
                    reapproval_of=origin,
                ):
                    reapproved.append(created)
                continue
        if created := _create(workload, now, attempt=latest.attempt + 1, engine=engine):
            raised.append(created)
    return raised, reapproved


def withdraw_requests(now: datetime) -> int:
    """Pending requests whose workload lost the reservation they answer
    (evicted, finished, deleted, deactivated; it is asked again when Kueue
    reserves quota for it again), or whose job was cancelled. The reason is
    kept on the request (``comment``) and in the audit, and the requester and
    everyone the request reached are told (``notify_withdrawn``), in the same
    transaction: a pass that dies before telling them withdraws it again."""
    pending = list(
        ApprovalRequest.objects.filter(state=ApprovalState.PENDING).select_related(
            "job", "requester"
        )
    )
    records = {
        r.uid: r
        for r in WorkloadRecord.objects.filter(uid__in=[p.workload_uid for p in pending]).only(
            "uid", "state", "reserved_at", "reason"
        )
    }
    withdrawn = 0
    for request in pending:
        workload = records.get(request.workload_uid)
        cancelled = request.job is not None and request.job.state in (
            JobState.CANCELLING,
            JobState.CANCELLED,
        )
        if holds(request, workload) and not cancelled:
            continue
        why = why_withdrawn(request, workload, request.job)
        try:
            with transaction.atomic():
                if not ApprovalRequest.objects.filter(
                    pk=request.pk, state=ApprovalState.PENDING
                ).update(state=ApprovalState.WITHDRAWN, decided_at=now, comment=why):
                    continue
                request.state, request.decided_at, request.comment = (
                    ApprovalState.WITHDRAWN,
                    now,
                    why,
                )
                record(
                    request,
                    ApprovalAction.WITHDRAWN,
                    message=f"withdrawn before anyone decided: {why}",
                    at=now,
                )
                notify_withdrawn(request)
        except Exception:  # a broken lookup or audit write: the next pass tries again
            log.exception("approval #%s: withdrawing it failed", request.pk)
            continue
        withdrawn += 1
    return withdrawn


def expire_requests(now: datetime) -> list[int]:
    """Pending requests past their deadline become ``expired`` (a rejection)."""
    return [
        request.pk
        for request in ApprovalRequest.objects.filter(
            state=ApprovalState.PENDING, expires_at__lte=now
        )
        if expire(request, now)
    ]


def refused(record: WorkloadRecord) -> bool:
    """Deactivated because its latest approval request was rejected (or expired)
    and that was written to the Workload (asked by jobs' follow step)."""
    latest = (
        ApprovalRequest.objects.filter(workload_uid=record.uid)
        .order_by("-attempt")
        .values_list("state", "written")
        .first()
    )
    return (
        latest is not None
        and latest[1]
        and latest[0] in (ApprovalState.REJECTED, ApprovalState.EXPIRED)
    )
