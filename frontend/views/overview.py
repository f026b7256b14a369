"""The overview: capacity and allocation, who waits, the worst waits,
preemptions in the last day, whether the cluster matches the policy, and the
approvals waiting for the signed-in user."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from frontend import charts
from frontend.views.approvals import summary_for
from frontend.views.common import page, visible_team_ids
from jobs import stats
from jobs.models import JobState
from queues.models import DriftRecord, ReconcileRun


def _reconcile_status() -> dict[str, object]:
    runs = ReconcileRun.objects.filter(dry_run=False).exclude(status=ReconcileRun.Status.SKIPPED)
    last = runs.order_by("-pk").first()
    since = timezone.now() - timedelta(days=1)
    return {
        "last": last,
        "drift_day": DriftRecord.objects.filter(detected_at__gte=since).count(),
        "failed_day": runs.filter(
            started_at__gte=since,
            status__in=[ReconcileRun.Status.FAILED, ReconcileRun.Status.PARTIAL],
        ).count(),
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    capacity = stats.capacity_now()
    worst = stats.worst_waits(now - timedelta(days=1))
    jobs = stats.job_counts(visible_team_ids(request.user))
    measured_by = stats.utilisation_source()
    # The simulated cluster's utilisation is made up, and says so in the legend.
    utilisation_source = "simulated" if measured_by == "simulated" else ""
    context = {
        "figures": {
            "gpus": sum(int(row["capacity"]) for row in capacity),
            "allocated": sum(int(row["allocated"]) for row in capacity),
            "utilised": round(sum(float(row["utilised"] or 0) for row in capacity), 1)
            if any(row["utilised"] is not None for row in capacity)
            else None,
            "pending": stats.pending_total(),
            "running": jobs.get(JobState.RUNNING, 0),
            "waiting_jobs": sum(
                jobs.get(s, 0)
                for s in (JobState.QUEUED, JobState.QUOTA_RESERVED, JobState.PREEMPTED)
            ),
        },
        "capacity_now": charts.capacity_now(capacity, utilisation_source=utilisation_source),
        "measured_by": measured_by,
        "capacity_history": charts.capacity_over_time(
            stats.capacity_series(now - timedelta(hours=24)),
            utilisation_source=utilisation_source,
        ),
        "pending": charts.pending_by_queue(stats.pending_by_queue()),
        "worst": charts.worst_waits(worst),
        "worst_rows": worst,
        "preemptions": charts.preemptions_by_reason(
            stats.preemptions_since(now - timedelta(days=1))
        ),
        "reconcile": _reconcile_status(),
        "cluster_backend": settings.BERTH_CLUSTER,
        "approvals": summary_for(request),
    }
    return page(request, "frontend/overview.html", context, nav="overview", charts=True)
