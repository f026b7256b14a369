"""Jobs: a filterable list (the API's filters), and one job's page with its
timeline, resources, flavors, why it waits, manifest and GPU-hours."""

from __future__ import annotations

import yaml
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone

from cluster.models import LIVE_STATES
from frontend import charts
from frontend.views.common import page, paginate, query_without
from jobs import selectors
from jobs.explain import WAITING, explain_for
from jobs.filters import JobFilter
from jobs.models import JobKind, JobRequest, JobState
from queues.access import refuse

ORDERINGS = {
    "submitted_at": "submitted_at",
    "name": "name",
    "state": "state",
    "priority": "priority",
    "queue": "cluster_queue",
}


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = selectors.jobs_for(request.user).select_related(None).select_related("team")
    jobs = jobs.defer("manifest", "env", "command", "labels", "justification", "message")
    filtered = JobFilter(request.GET, queryset=jobs)
    sort = request.GET.get("sort", "-submitted_at")
    field = ORDERINGS.get(sort.lstrip("-"), "submitted_at")
    ordered = filtered.qs.order_by(("-" if sort.startswith("-") else "") + field, "-id")
    return page(
        request,
        "frontend/jobs.html",
        {
            "page": paginate(request, ordered),
            "filter": filtered,
            "states": JobState.choices,
            "kinds": JobKind.choices,
            "sort": sort,
            "query": query_without(request, "sort", "page"),
            "page_query": query_without(request, "page"),
            # Workloads this list does not show: not submitted through Berth.
            "other_workloads": selectors.submitted_through_berth(
                selectors.workloads_for(request.user).filter(state__in=LIVE_STATES),
                through_berth=False,
            ).count(),
        },
        nav="jobs",
    )


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = selectors.jobs_for(request.user).filter(pk=job_id).first()
    if job is None:
        if JobRequest.objects.filter(pk=job_id).exists():  # another team's: as if it did not exist
            raise refuse(
                request, f"job {job_id}: another team's", message="no such job in your teams"
            )
        raise Http404("no such job in your teams")
    events = selectors.timeline(job)
    context = {
        "job": job,
        "events": events,
        "timeline": charts.job_timeline(events, timezone.now()),
        "explanation": explain_for(request.user, job) if job.state in WAITING else None,
        # The latest approval request, for a job in a queue that needs one.
        "approval": job.approvals.select_related("decided_by")
        .order_by("-created_at", "-id")
        .first(),
        "manifest_yaml": "".join(
            "---\n" + yaml.safe_dump(obj, sort_keys=False) for obj in job.manifest
        ),
    }
    return page(request, "frontend/job.html", context, nav="jobs", charts=True)
