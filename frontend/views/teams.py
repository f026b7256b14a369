"""A team's home: its quotas and use, what it can borrow now and from whom
(``cluster.borrowing``),
its jobs, a submit form with the API's checks and a dry-run preview, and the
member's API tokens. Another team's page does not exist for a non-member."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count, OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from cluster import stats
from cluster.borrowing import borrowing_now
from cluster.fairness import set_starved_below, starved_below
from cluster.models import TeamUsageSnapshot
from frontend.charts.fair_share import percent, window_rows
from frontend.views.common import page
from jobs import selectors as job_selectors
from jobs import services as job_services
from jobs.api.serializers import JobSubmitSerializer
from jobs.models import JobRequest
from jobs.models.requests import TERMINAL_STATES
from queues.access import may_change_policy, may_see_team, refuse, visible_team_ids
from queues.api.conventions import flatten_errors
from queues.display import duration
from queues.errors import FieldError, PolicyInvalid
from queues.models import ClusterQueue, LocalQueue, Team, TeamFairness, TeamMembership

FORM_FIELDS = (
    "name", "kind", "image", "queue", "nodes", "gpus_per_node", "priority_class",
    "checkpoint_uri", "max_runtime_seconds", "expected_runtime_seconds", "justification",
)  # fmt: skip


def _team(request: HttpRequest, slug: str) -> Team:
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        raise Http404("no such team of yours")
    if not may_see_team(request.user, team.pk):
        raise refuse(request, f"team {slug}: not a member", message="no such team of yours")
    return team


def _form_data(post: Any, team: Team) -> dict[str, Any]:
    data: dict[str, Any] = {"team": team.slug}
    for name in FORM_FIELDS:
        value = post.get(name, "").strip()
        if value != "":
            data[name] = value
    command = post.get("command", "").split()
    data["command"] = command
    return data


def _submit(request: HttpRequest, team: Team) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """The form through the API's serializer and services: same checks, same errors."""
    data = _form_data(request.POST, team)
    serializer = JobSubmitSerializer(data=data)
    if not serializer.is_valid():
        return None, flatten_errors(serializer.errors)
    try:
        if "preview" in request.POST:
            return job_services.dry_run(request.user, dict(serializer.validated_data)), []
        job = job_services.submit(request.user, dict(serializer.validated_data))
    except PolicyInvalid as exc:
        return None, exc.errors
    return {"submitted": job}, []


def _fair_share(team: Team, errors: list[FieldError]) -> dict[str, Any]:
    """The team's fair share over each window, as text, and its threshold."""
    row = TeamFairness.objects.filter(team=team).first()
    threshold = starved_below(row)
    return {
        "row": row,
        "evaluated": row is not None and row.evaluated_at is not None,
        "windows": window_rows(row.figures if row else {}, float(threshold)),
        "below": percent(float(threshold)),
        "own": row is not None and row.starved_below is not None,
        "value": str(row.starved_below.normalize()) if row and row.starved_below else "",
        "errors": errors,
    }


def _set_threshold(request: HttpRequest, team: Team) -> list[FieldError]:
    """A platform admin gives the team its own threshold (or takes it away)."""
    if not may_change_policy(request.user):
        raise refuse(request, f"team {team.slug}: fair-share threshold by a non-admin")
    try:
        set_starved_below(team, request.POST.get("starved_below", ""), actor=request.user)
    except PolicyInvalid as exc:
        return exc.errors
    return []


@login_required
def team_page(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug)
    result: dict[str, Any] | None = None
    errors: list[FieldError] = []
    threshold_errors: list[FieldError] = []
    if request.method == "POST" and "starved_below" in request.POST:
        threshold_errors = _set_threshold(request, team)
        if not threshold_errors:
            return redirect(f"{request.path}#fair-share")
    elif request.method == "POST":
        result, errors = _submit(request, team)
        if result and "submitted" in result:
            return redirect("job", result["submitted"].pk)
    queues = ClusterQueue.objects.filter(local_queues__namespace__team=team).distinct()
    context = {
        "team": team,
        "quotas": [(q, stats.queue_quota_rows(q.name)) for q in queues.order_by("name")],
        "borrowing": borrowing_now([q.name for q in queues.order_by("name")]),
        "usage": team.usage.order_by("-at").first(),
        "fair_share": _fair_share(team, threshold_errors),
        "jobs": job_selectors.jobs_for(request.user).filter(team=team)[:20],
        "local_queues": LocalQueue.objects.filter(namespace__team=team)
        .select_related("cluster_queue__queue_class", "namespace")
        .order_by("name"),
        "form": request.POST if request.method == "POST" and not threshold_errors else {},
        "errors": errors,
        "field_errors": {e.field: e for e in errors},
        "result": result,
        "approval_window": duration(settings.BERTH_APPROVAL_TIMEOUT),
    }
    # Only [data-live] sections refresh: the form is never replaced under the user.
    return page(request, "frontend/team.html", context, nav="teams")


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    """The teams the user can see (every team, for an admin): namespaces, queues,
    members, GPUs allocated now, jobs that are live, and their fair share over
    the last hour."""
    visible = visible_team_ids(request.user)
    teams = Team.objects.order_by("slug").prefetch_related("namespaces")
    if visible is not None:
        teams = teams.filter(pk__in=visible)
    live = dict(
        JobRequest.objects.exclude(state__in=sorted(TERMINAL_STATES))
        .values_list("team_id")
        .annotate(n=Count("id"))
        .values_list("team_id", "n")
    )
    members = dict(
        TeamMembership.objects.values_list("team_id")
        .annotate(n=Count("user", distinct=True))
        .values_list("team_id", "n")
    )
    queues: dict[int, set[str]] = {}
    for team_id, name in LocalQueue.objects.filter(namespace__team__in=teams).values_list(
        "namespace__team_id", "cluster_queue__name"
    ):
        queues.setdefault(team_id, set()).add(name)
    fairness = {
        row.team_id: {
            "share": percent((row.figures or {}).get("1h", {}).get("ratio")),
            "starved": row.starved_since is not None,
        }
        for row in TeamFairness.objects.filter(team__in=teams, evaluated_at__isnull=False)
    }
    # A correlated subquery, not DISTINCT ON: the embedded mode runs on SQLite.
    newest_at = TeamUsageSnapshot.objects.filter(team=OuterRef("team")).order_by("-at")
    newest = {
        u.team_id: u
        for u in TeamUsageSnapshot.objects.filter(
            team__in=teams, at=Subquery(newest_at.values("at")[:1])
        )
    }
    rows = [
        {
            "team": team,
            "namespaces": sorted(n.name for n in team.namespaces.all()),
            "queues": sorted(queues.get(team.pk, ())),
            "members": members.get(team.pk, 0),
            "live_jobs": live.get(team.pk, 0),
            "usage": newest.get(team.pk),
            "fair_share": fairness.get(team.pk),
        }
        for team in teams
    ]
    return page(request, "frontend/teams.html", {"rows": rows}, nav="teams")


@login_required
def my_team(request: HttpRequest) -> HttpResponse:
    """The signed-in member's team page; the list when they see several (an
    admin sees them all); a page saying so when they are in none."""
    visible = visible_team_ids(request.user)
    if visible is None or len(visible) > 1:
        return redirect("teams")
    team = Team.objects.filter(pk__in=visible).first()
    if team is None:
        return page(request, "frontend/no_team.html", {}, nav="teams", live=False)
    return redirect("team", team.slug)
