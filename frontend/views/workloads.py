"""Workloads: everything Kueue queues on the cluster, whoever created it —
Berth's jobs and those made some other way (kubectl, a pipeline, the demo
load) — so a cluster busy with work Berth did not submit never looks idle."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from cluster.models import LIVE_STATES, WorkloadState
from frontend.views.common import page, paginate, query_without
from jobs.selectors import submitted_through_berth, workloads_for

ORIGINS = {"berth": "submitted through Berth", "other": "created some other way"}


@login_required
def workload_list(request: HttpRequest) -> HttpResponse:
    workloads = workloads_for(request.user).defer("pod_sets", "admission_checks", "message")
    state = request.GET.get("state", "")
    if state in WorkloadState.values:
        workloads = workloads.filter(state=state)
    elif state != "any":
        state = ""
        workloads = workloads.filter(state__in=LIVE_STATES)
    if queue := request.GET.get("queue", "").strip():
        workloads = workloads.filter(cluster_queue=queue)
    origin = request.GET.get("origin", "")
    if origin in ORIGINS:
        workloads = submitted_through_berth(workloads, origin == "berth")
    return page(
        request,
        "frontend/workloads.html",
        {
            "page": paginate(request, workloads.order_by("-created_at", "-id")),
            "state": state,
            "states": [s for s in WorkloadState if s != WorkloadState.DELETED],
            "origin": origin,
            "origins": ORIGINS,
            "page_query": query_without(request, "page"),
        },
        nav="workloads",
    )
