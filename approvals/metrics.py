"""The approval controller's health for /metrics: requests by state, how long
the oldest pending one has waited, and decisions not yet on their Workload (a
number that should stay near zero; growing, the re-drive is failing)."""

from __future__ import annotations

from django.db.models import Count, Min
from django.utils import timezone

from approvals.models import DECIDED_STATES, ApprovalRequest, ApprovalState
from cluster.exposition import Metric


def approval_metrics() -> list[Metric]:
    """Three families from two queries."""
    requests = Metric(
        "berth_approval_requests", "gauge", "Approval requests (urgent-release), by state."
    )
    counts = dict(
        ApprovalRequest.objects.values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    for state in ApprovalState:
        requests.add(counts.get(state.value, 0), {"state": state.value})
    waiting = ApprovalRequest.objects.filter(state=ApprovalState.PENDING).aggregate(
        oldest=Min("created_at")
    )["oldest"]
    oldest = Metric(
        "berth_approval_oldest_pending_seconds",
        "gauge",
        "Seconds the oldest pending approval request has waited (0 when none waits).",
    )
    oldest.add((timezone.now() - waiting).total_seconds() if waiting else 0.0)
    undelivered = Metric(
        "berth_approval_undelivered_decisions",
        "gauge",
        "Decided approval requests whose decision is not on their Workload yet.",
    )
    undelivered.add(
        ApprovalRequest.objects.filter(
            state__in=sorted(DECIDED_STATES), applied_at__isnull=True
        ).count()
    )
    return [requests, oldest, undelivered]
