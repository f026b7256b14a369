"""The approval controller's health for /metrics: requests by state, how long
the oldest pending one has waited, and decisions not yet on their Workload (a
number that should stay near zero; growing, the re-drive is failing)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone

from approvals.models import DECIDED_STATES, ApprovalRequest, ApprovalState
from queues.metric_families import Family, gauge


class ApprovalsCollector:
    def collect(self) -> Iterator[Family]:
        yield from approval_metrics()


def approval_metrics() -> list[Family]:
    """Three families from two queries."""
    requests = gauge("berth_approval_requests", "Approval requests (urgent-release), by state.")
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
    oldest = gauge(
        "berth_approval_oldest_pending_seconds",
        "Seconds the oldest pending approval request has waited (0 when none waits).",
    )
    oldest.add((timezone.now() - waiting).total_seconds() if waiting else 0.0)
    undelivered = gauge(
        "berth_approval_undelivered_decisions",
        "Decided approval requests whose decision is not on their Workload yet.",
    )
    undelivered.add(
        ApprovalRequest.objects.filter(
            state__in=sorted(DECIDED_STATES), applied_at__isnull=True
        ).count()
    )
    return [requests, oldest, undelivered]
