"""Whether a request's quota reservation still holds, as sync last saw it,
and why not in words. A request answers one reservation: once the workload
lost it (evicted, finished, deleted, deactivated, or admitted without the
check), a decision can no longer be written to it. The controller withdraws
such a request; a decision arriving for it is refused (``approvals.decide``),
or, for a rejection of a workload that may reserve quota again, carried to
its next reservation (``approvals.lifecycle``)."""

from __future__ import annotations

from datetime import datetime

from approvals.models import ApprovalRequest
from cluster.models import EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from jobs.models import JobRequest, JobState
from queues.engine.preemption import REASON_TEXT, Reason

# A workload in one of these may reserve quota again: a rejection stands for that.
MAY_RESERVE_AGAIN = frozenset(
    {WorkloadState.PENDING, WorkloadState.QUOTA_RESERVED, WorkloadState.EVICTED}
)


def holds(request: ApprovalRequest, workload: WorkloadRecord | None) -> bool:
    """Whether ``workload`` (sync's record) still holds the reservation
    ``request`` answers. No record at all is no evidence it moved on (sync
    rows are never deleted while a request may refer to them)."""
    return workload is None or (
        workload.state == WorkloadState.QUOTA_RESERVED
        and workload.reserved_at == request.reserved_at
    )


def workload_of(request: ApprovalRequest) -> WorkloadRecord | None:
    return (
        WorkloadRecord.objects.filter(uid=request.workload_uid)
        .only("uid", "state", "reserved_at", "reason")
        .first()
    )


def preempted_by(workload: WorkloadRecord, since: datetime | None) -> str | None:
    """Kueue's preemption that ended the reservation, said in words, if any."""
    events = WorkloadEvent.objects.filter(workload=workload, type=EventType.PREEMPTED)
    if since is not None:
        events = events.filter(at__gte=since)
    event = events.order_by("-at", "-id").first()
    if event is None:
        return None
    try:
        why = f" ({REASON_TEXT[Reason(event.reason)]})"
    except ValueError:
        why = f" ({event.reason})" if event.reason else ""
    details = event.details or {}
    preemptor = details.get("preemptor")
    if not preemptor and details.get("preemptor_uid"):
        # Sync names the preemptor only if it had recorded it already.
        found = (
            WorkloadRecord.objects.filter(uid=details["preemptor_uid"])
            .values_list("namespace", "name")
            .first()
        )
        preemptor = f"{found[0]}/{found[1]}" if found else None
    room = f" to make room for {preemptor}" if preemptor else ""
    return f"Kueue preempted it{room}{why}: it lost the quota reserved for it and queues again"


def why_withdrawn(
    request: ApprovalRequest, workload: WorkloadRecord | None, job: JobRequest | None
) -> str:
    """Why a pending request is done with, in words for the requester, the
    approvers and the audit."""
    if job is not None and job.state in (JobState.CANCELLING, JobState.CANCELLED):
        by = job.message if job.message.startswith("cancelled by ") else "cancelled"
        return f"its job {job.name} was {by}"
    if workload is None:
        return "its workload is gone"
    state = workload.state
    if state == WorkloadState.DELETED:
        return "its workload was deleted from the cluster"
    if state in (WorkloadState.FINISHED, WorkloadState.FAILED):
        return f"its workload {'failed' if state == WorkloadState.FAILED else 'finished'}"
    if state == WorkloadState.DEACTIVATED:
        reason = f" ({workload.reason})" if workload.reason else ""
        return f"its workload was deactivated{reason}"
    if state == WorkloadState.ADMITTED:
        return "its workload was admitted without this decision"
    if state == WorkloadState.QUOTA_RESERVED:
        return (
            "it lost the quota reservation this request asked about and has a new one; "
            "Berth asks about the new one"
        )
    if preempted := preempted_by(workload, request.reserved_at):
        return preempted
    reason = f" ({workload.reason})" if workload.reason else ""
    return f"Kueue evicted it{reason}: it lost the quota reserved for it and queues again"
