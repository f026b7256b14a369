"""Reads over what sync recorded, for pages and (later) the API."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, QuerySet, Subquery

from accounts.roles import is_platform_admin
from approvals.models import ApprovalEvent
from cluster.models import QueueSnapshot, WorkloadRecord, WorkloadState
from jobs.models import JobRequest
from queues.selectors import team_ids_of

GPU = "nvidia.com/gpu"


def workload_counts() -> dict[str, int]:
    """Workloads per state, deleted ones left out, in lifecycle order."""
    counts = dict(
        WorkloadRecord.objects.exclude(state=WorkloadState.DELETED)
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    return {state.label: counts[state.value] for state in WorkloadState if counts.get(state.value)}


def recent_workloads(limit: int = 10) -> QuerySet[WorkloadRecord]:
    return WorkloadRecord.objects.select_related("team").order_by("-synced_at", "-id")[:limit]


def latest_gpu_usage() -> list[QueueSnapshot]:
    """Each ClusterQueue's GPU rows (one per flavor) from the newest snapshot."""
    newest = QueueSnapshot.objects.aggregate(at=Max("at"))["at"]
    if newest is None:
        return []
    return list(
        QueueSnapshot.objects.filter(at=newest, resource=GPU).order_by("cluster_queue", "flavor")
    )


# What a workload can be while it holds quota or waits for it.
LIVE_WORKLOAD_STATES = (
    WorkloadState.PENDING,
    WorkloadState.QUOTA_RESERVED,
    WorkloadState.ADMITTED,
    WorkloadState.EVICTED,
)


def workloads_for(user: Any) -> QuerySet[WorkloadRecord]:
    """Every workload sync recorded that ``user`` may see — their teams'
    namespaces (every namespace, for an admin) — whoever created it: Berth, the
    demo load, kubectl. ``berth_job`` is the id of the Berth job it belongs to,
    or None when it was created some other way."""
    berth_job = JobRequest.objects.filter(workload_id=OuterRef("pk")).order_by("-id").values("id")
    workloads = WorkloadRecord.objects.exclude(state=WorkloadState.DELETED).annotate(
        berth_job=Subquery(berth_job[:1])
    )
    if is_platform_admin(user):
        return workloads
    return workloads.filter(team_id__in=team_ids_of(user))


def submitted_through_berth(
    workloads: QuerySet[WorkloadRecord], through_berth: bool = True
) -> QuerySet[WorkloadRecord]:
    """Only the workloads of Berth's jobs (or, with False, only the others)."""
    made = Exists(JobRequest.objects.filter(workload_id=OuterRef("pk")))
    return workloads.filter(made if through_berth else ~made)


def jobs_for(user: Any) -> QuerySet[JobRequest]:
    """The jobs ``user`` may see: their teams' (all of them for an admin)."""
    jobs = JobRequest.objects.select_related("team", "submitted_by", "workload")
    if is_platform_admin(user):
        return jobs
    return jobs.filter(team_id__in=team_ids_of(user))


def timeline(job: JobRequest) -> list[dict[str, Any]]:
    """Berth's own steps (submitted, created, approvals, cancelled) and the
    workload's events."""
    steps: list[dict[str, Any]] = [
        {"type": "submitted", "at": job.submitted_at, "reason": "", "message": "", "details": {}}
    ]
    if job.created_on_cluster_at:
        steps.append(
            {
                "type": "created-on-cluster",
                "at": job.created_on_cluster_at,
                "reason": "",
                "message": "",
                "details": {"uid": job.cluster_uid},
            }
        )
    if job.workload is not None:
        events = job.workload.events.order_by("at", "id")
        steps.extend(dict(e) for e in events.values("type", "at", "reason", "message", "details"))
    for event in (
        ApprovalEvent.objects.filter(request__job=job)
        .select_related("actor", "request")
        .order_by("at", "id")
    ):
        steps.append(
            {
                "type": f"approval-{event.action}",
                "at": event.at,
                "reason": event.request.state,
                "message": event.message,
                "details": {
                    "approval_id": event.request_id,
                    "actor": event.actor.get_username() if event.actor else None,
                },
            }
        )
    if job.cancelled_at:
        steps.append(
            {
                "type": "cancelled",
                "at": job.cancelled_at,
                "reason": job.reason,
                "message": job.message,
                "details": {},
            }
        )
    # Cluster times have whole seconds: within a second, Berth's own step (it
    # submitted, then created) comes before what the cluster did with it.
    own = {"submitted": 0, "created-on-cluster": 1}
    return sorted(
        steps, key=lambda s: (s["at"].replace(microsecond=0), own.get(s["type"], 2), s["at"])
    )
