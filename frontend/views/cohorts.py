"""Cohorts: the lending tree, who borrowed how many GPU-hours from whom over a
chosen window, and each queue's weighted share over time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from cluster import stats
from frontend import charts
from frontend.views.common import page
from queues.models import ClusterQueue, Cohort

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}


def cohort_tree() -> list[dict[str, Any]]:
    """Root cohorts, each with its queues and child cohorts, recursively."""
    cohorts = list(Cohort.objects.select_related("parent").order_by("name"))
    queues: dict[int, list[str]] = {}
    for cohort_id, name in ClusterQueue.objects.filter(cohort__isnull=False).values_list(
        "cohort_id", "name"
    ):
        queues.setdefault(cohort_id, []).append(name)
    children: dict[int | None, list[Cohort]] = {}
    for cohort in cohorts:
        children.setdefault(cohort.parent_id, []).append(cohort)

    def node(cohort: Cohort, depth: int) -> dict[str, Any]:
        return {
            "name": cohort.name,
            "weight": cohort.fair_sharing_weight,
            "queues": sorted(queues.get(cohort.pk, [])),
            "children": [node(c, depth + 1) for c in children.get(cohort.pk, [])]
            if depth < 32
            else [],
        }

    return [node(c, 0) for c in children.get(None, [])]


@login_required
def cohort_page(request: HttpRequest) -> HttpResponse:
    window = request.GET.get("window", "7d")
    if window not in WINDOWS:
        window = "7d"
    since = timezone.now() - WINDOWS[window]
    lenders, borrowers, matrix = stats.borrowing_matrix(since)
    pairs = sorted(
        (
            (borrower, lender, hours)
            for borrower, row in zip(borrowers, matrix, strict=True)
            for lender, hours in zip(lenders, row, strict=True)
            if hours
        ),
        key=lambda p: -p[2],
    )
    context = {
        "tree": cohort_tree(),
        "window": window,
        "windows": list(WINDOWS),
        "heatmap": charts.borrowing_heatmap(lenders, borrowers, matrix),
        "pairs": pairs,
        "shares": charts.fair_share_over_time(stats.fair_share_series(since)),
        "unclustered": list(
            ClusterQueue.objects.filter(cohort__isnull=True).values_list("name", flat=True)
        ),
    }
    return page(request, "frontend/cohorts.html", context, nav="cohorts", charts=True)
