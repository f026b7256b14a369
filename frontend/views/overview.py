"""The overview: capacity and allocation, who waits, the worst waits,
preemptions in the last day, whether the cluster matches the policy, whether
each sync step keeps up, and the approvals waiting for the signed-in user."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from cluster import stats
from cluster.fairness import ALERT_WINDOW, starved_below
from cluster.models import SyncStepName
from cluster.sync_steps import health
from frontend import charts
from frontend.charts.fair_share import WINDOW_LABELS, percent
from frontend.shared_figures import shared_figures, sync_and_reconcile_marks
from frontend.views.approvals import summary_for
from frontend.views.common import page
from jobs.models import JobState
from jobs.selectors import job_counts
from queues.access import visible_team_ids
from queues.models import DriftRecord, ReconcileRun, TeamFairness

# A step that has not run for this many sync intervals is late (beat or the
# workers are down, or the embedded loop stopped).
LATE_AFTER_INTERVALS = 3


def _reconcile_status() -> dict[str, object]:
    runs = ReconcileRun.objects.filter(dry_run=False).exclude(status=ReconcileRun.Status.SKIPPED)
    last = runs.order_by("-pk").first()
    since = timezone.now() - timedelta(days=1)
    return {
        "last": last,
        # GET /api/v1/policy/plan/ answers 404 until someone has made a plan.
        "has_plan": ReconcileRun.objects.filter(dry_run=True).exists(),
        "drift_day": DriftRecord.objects.filter(detected_at__gte=since).count(),
        "failed_day": runs.filter(
            started_at__gte=since,
            status__in=[ReconcileRun.Status.FAILED, ReconcileRun.Status.PARTIAL],
        ).count(),
    }


def _times(count: int) -> str:
    return "its latest run" if count == 1 else f"its last {count} runs"


def _sync_health(now: datetime) -> dict[str, object]:
    """Each sync step in words: working, failing (since when, the error), late,
    or not run yet."""
    late_after = timedelta(seconds=LATE_AFTER_INTERVALS * int(settings.BERTH_SYNC_INTERVAL))
    steps = []
    for row in health():
        step: dict[str, object] = {
            "step": row.step,
            "label": SyncStepName(row.step).label,
            "last_run": row.last_run_at,
            "last_success": row.last_success_at,
            "error": "",
        }
        if row.last_run_at is None:
            step |= {"status": "not run yet", "css": "muted", "detail": ""}
        elif not row.up:
            step |= {
                "status": "failing",
                "css": "bad",
                "detail": f"failed {_times(row.consecutive_failures)}",
                "error": row.last_error,
            }
        elif now - row.last_run_at > late_after:
            step |= {"status": "late", "css": "bad", "detail": "it has not run for a while"}
        else:
            step |= {"status": "working", "css": "good", "detail": ""}
        steps.append(step)
    return {
        "steps": steps,
        "failing": [s for s in steps if s["status"] in ("failing", "late")],
        "ran": any(s["last_run"] is not None for s in steps),
    }


def _cluster_figures() -> dict[str, object]:
    """Everything on the overview that every viewer sees alike."""
    now = timezone.now()
    capacity = stats.capacity_now()
    worst = stats.worst_waits(now - timedelta(days=1))
    measured_by = stats.utilisation_source()
    # The simulated cluster's utilisation is made up, and says so in the legend.
    utilisation_source = "simulated" if measured_by == "simulated" else ""
    return {
        "cluster": {
            "gpus": sum(int(row["capacity"]) for row in capacity),
            "allocated": sum(int(row["allocated"]) for row in capacity),
            "utilised": round(sum(float(row["utilised"] or 0) for row in capacity), 1)
            if any(row["utilised"] is not None for row in capacity)
            else None,
            "pending": stats.pending_total(),
            "admitted": stats.admitted_total(),
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
        "sync": _sync_health(now),
        "cluster_backend": settings.BERTH_CLUSTER,
    }


def _fair_shares(visible: set[int] | None) -> dict[str, object]:
    """Teams in a starvation episode (as the notices and /metrics say; every
    viewer sees which, only the teams one may open are links), from the
    figures beat keeps."""
    rows = list(TeamFairness.objects.filter(evaluated_at__isnull=False).select_related("team"))
    starved = []
    for row in rows:
        if row.starved_since is None:
            continue
        figures = row.figures or {}
        starved.append(
            {
                "team": row.team.slug,
                "link": visible is None or row.team_id in visible,
                "share": percent(figures.get(ALERT_WINDOW, {}).get("ratio")),
                "day": percent(figures.get("24h", {}).get("ratio")),
                "below": percent(float(starved_below(row))),
                "waiting_gpus": row.waiting_gpus,
                "since": row.starved_since,
            }
        )
    return {
        "evaluated": max((r.evaluated_at for r in rows if r.evaluated_at), default=None),
        "teams": len(rows),
        "starved": sorted(starved, key=lambda s: str(s["team"])),
        "window": WINDOW_LABELS[ALERT_WINDOW],
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    shared = shared_figures("overview", sync_and_reconcile_marks(), _cluster_figures)
    visible = visible_team_ids(request.user)
    jobs = job_counts(visible)
    waiting = (JobState.QUEUED, JobState.QUOTA_RESERVED, JobState.PREEMPTED)
    context = {
        **shared,
        "figures": {
            **shared["cluster"],  # type: ignore[dict-item]
            "running": jobs.get(JobState.RUNNING, 0),
            "waiting_jobs": sum(jobs.get(s, 0) for s in waiting),
        },
        "approvals": summary_for(request),
        "fair_shares": _fair_shares(visible),
    }
    return page(request, "frontend/overview.html", context, nav="overview", charts=True)
