"""Reads over what sync recorded, for pages and (later) the API."""

from __future__ import annotations

from django.db.models import Count, Max, QuerySet

from jobs.models import QueueSnapshot, WorkloadRecord, WorkloadState

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
