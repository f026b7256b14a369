from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.roles import is_platform_admin
from jobs import selectors as job_selectors
from queues import selectors
from queues.models import ReconcileRun


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The landing page: where to go next, and the policy at a glance."""
    return render(
        request,
        "frontend/home.html",
        {
            "is_admin": is_platform_admin(request.user),
            "cluster_backend": settings.BERTH_CLUSTER,
            "last_apply": ReconcileRun.objects.filter(dry_run=False)
            .exclude(status=ReconcileRun.Status.SKIPPED)
            .order_by("-pk")
            .first(),
            "workload_counts": job_selectors.workload_counts(),
            "recent_workloads": job_selectors.recent_workloads(),
            "gpu_usage": job_selectors.latest_gpu_usage(),
            "counts": {
                "Teams": selectors.teams().count(),
                "Resource flavors": selectors.resource_flavors().count(),
                "Cohorts": selectors.cohorts().count(),
                "Cluster queues": selectors.cluster_queues().count(),
                "Local queues": selectors.local_queues().count(),
                "Priority classes": selectors.priority_classes().count(),
            },
        },
    )
