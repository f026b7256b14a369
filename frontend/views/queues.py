"""The queue list and one queue's page: quotas and use, borrowing, waits,
the pending line with positions and start estimates, recent admissions and
preemptions, and the Kueue YAML Berth renders for it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone

from cluster import stats
from cluster.models import EventType, PendingForecast, WorkloadEvent
from frontend import charts
from frontend.shared_figures import shared_figures, sync_and_reconcile_marks
from frontend.views.common import page, paginate, query_without, sorted_rows
from jobs import selectors as job_selectors
from queues.access import WorkloadView, workload_views
from queues.kueue.render import to_yaml_documents
from queues.models import ClusterQueue
from queues.reconcile import desired_objects, policy_version

SORT_KEYS = {
    "name": lambda q: q.name,
    "nominal": lambda q: q.nominal,
    "usage": lambda q: q.usage,
    "borrowed": lambda q: q.borrowed,
    "lent": lambda q: q.lent,
    "utilised": lambda q: q.utilised,
    "pending": lambda q: q.pending,
    "p50_day": lambda q: q.p50_day,
    "p95_day": lambda q: q.p95_day,
    "p50_week": lambda q: q.p50_week,
    "p95_week": lambda q: q.p95_week,
    "preemptions": lambda q: q.preemptions_week,
}

# Pending workloads listed on a queue's page: the first ones, or (asked for) all.
PENDING_SHOWN = 10
PENDING_ALL = 1000


@login_required
def queue_list(request: HttpRequest) -> HttpResponse:
    rows, sort = sorted_rows(
        request,
        shared_figures(
            "queue-rows", (*sync_and_reconcile_marks(), policy_version()), stats.queue_rows
        ),
        SORT_KEYS,
        "name",
    )
    return page(
        request,
        "frontend/queues.html",
        {
            "page": paginate(request, rows),
            "sort": sort,
            "query": query_without(request, "sort", "page"),
            "page_query": query_without(request, "page"),
        },
        nav="queues",
    )


_rendered: tuple[int, list[dict[str, Any]]] | None = None


def _policy_objects() -> list[dict[str, Any]]:
    """The rendered policy, once per policy version (rendering it all per page
    view costs too much with hundreds of queues)."""
    global _rendered
    version = policy_version()
    cached = _rendered
    if cached is None or cached[0] != version:
        cached = _rendered = (version, desired_objects())
    return cached[1]


def _kueue_yaml(name: str) -> str:
    mine = [
        obj
        for obj in _policy_objects()
        if (obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == name)
        or (obj["kind"] == "LocalQueue" and obj.get("spec", {}).get("clusterQueue") == name)
    ]
    return to_yaml_documents(mine)


def _preemptor(who: str, views: dict[str, WorkloadView]) -> str:
    """Who preempted, as the viewer may read it: its name if theirs."""
    if not who:
        return ""
    view = views.get(who.split("/")[0])
    if view is not None and view.full:
        return who
    return f"a workload of team {view.team}" if view and view.team else "another team's workload"


@login_required
def queue_detail(request: HttpRequest, name: str) -> HttpResponse:
    queue = (
        ClusterQueue.objects.select_related("team", "cohort", "queue_class")
        .filter(name=name)
        .first()
    )
    if queue is None:
        raise Http404(f"no ClusterQueue {name}")
    now = timezone.now()
    week = now - timedelta(days=7)
    # The head of the line by default: a long line would push everything else
    # off the page. ?pending=all lists it whole.
    forecasts = PendingForecast.objects.filter(cluster_queue=name)
    pending_total = forecasts.count()
    shown = PENDING_ALL if request.GET.get("pending") == "all" else PENDING_SHOWN
    pending = list(
        forecasts.select_related("workload").order_by("position", "workload__created_at")[:shown]
    )
    # Every workload in the line is listed, since the line explains each wait;
    # another team's reads as "a workload of team X" (queues.access.WorkloadView),
    # and links to its job page only for the viewer's own (others' are 404s).
    jobs = dict(
        job_selectors.jobs_for(request.user)
        .filter(workload_id__in=[p.workload_id for p in pending])
        .values_list("workload_id", "id")
    )
    recent = list(
        WorkloadEvent.objects.filter(
            workload__cluster_queue=name,
            type__in=[EventType.ADMITTED, EventType.PREEMPTED, EventType.EVICTED],
            at__gte=week,
        )
        .select_related("workload")
        .order_by("-at")[:20]
    )
    preemptors = {e.pk: str((e.details or {}).get("preemptor") or "") for e in recent}
    views = workload_views(
        request.user,
        [p.workload.namespace for p in pending]
        + [e.workload.namespace for e in recent]
        + [who.split("/")[0] for who in preemptors.values() if "/" in who],
    )
    row = next(iter(stats.queue_rows(now, names=[name])), None)
    context = {
        "queue": queue,
        "row": row,
        "quota": charts.queue_quota(stats.queue_quota_rows(name)),
        "usage": charts.usage_over_time(stats.queue_usage_series(name, now - timedelta(hours=24))),
        "waits": charts.wait_distribution(stats.wait_histogram(name, week)),
        "trend": charts.wait_trend(stats.daily_waits(name, 14, now)),
        "preemptions": stats.preemptions_since(week, name),
        "pending": [(p, jobs.get(p.workload_id), views[p.workload.namespace]) for p in pending],
        "pending_total": pending_total,
        "recent": [
            (e, views[e.workload.namespace], _preemptor(preemptors[e.pk], views)) for e in recent
        ],
        "kueue_yaml": _kueue_yaml(name),
    }
    return page(request, "frontend/queue.html", context, nav="queues", charts=True)
