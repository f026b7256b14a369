"""Quota grant pages: the list (open ones first), the request form, and one
grant's page (its impact, what it did to the policy, and, for whoever may,
the Approve / Reject / End forms).

Who sees and does what is ``grants.access``'s business: a grant outside
``visible_to(user)`` does not exist (404). The forms go through
``grants.services`` and ``grants.lifecycle``, which refuse without changing
anything or change once; the page only says what happened."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone

from accounts.models import AccessDenial
from accounts.roles import is_platform_admin
from accounts.services import record_access_denial
from frontend.views.common import page
from grants import lifecycle
from grants.access import NotAllowed, is_decider, may_decide, may_end, visible_to
from grants.impact import whatif_waits
from grants.models import GrantKind, GrantState, QuotaGrant
from grants.services import AlreadyDecided, describe, request_grant
from queues.access import refuse
from queues.errors import FieldError, PolicyInvalid
from queues.models import ClusterQueue, ResourceFlavor, TeamMembership

OPEN = (GrantState.PENDING, GrantState.ACTIVE)
FORM_FIELDS = ("cluster_queue", "kind", "flavor", "resource", "amount", "lender", "ends_at")


def _grants(user: Any) -> Any:
    return visible_to(user).select_related(
        "team", "requester", "decided_by", "ended_by", "whatif_run"
    )


@login_required
def grant_list(request: HttpRequest) -> HttpResponse:
    grants = _grants(request.user)
    show_all = request.GET.get("all") == "1"
    listed = grants if show_all else grants.filter(state__in=OPEN)
    now = timezone.now()
    rows = [
        {"g": g, "summary": describe(g), "left": (g.ends_at - now).total_seconds()}
        for g in listed.order_by("ends_at" if not show_all else "-created_at", "id")[:500]
    ]
    context = {
        "rows": rows,
        "show_all": show_all,
        "decider": is_decider(request.user),
        "counts": {"open": grants.filter(state__in=OPEN).count(), "all": grants.count()},
    }
    return page(request, "frontend/grants.html", context, nav="grants")


def _queues_for(user: Any) -> Any:
    """The team queues ``user`` may ask for: their teams', every one for an admin."""
    queues = ClusterQueue.objects.filter(team__isnull=False).select_related("team")
    if is_platform_admin(user):
        return queues
    return queues.filter(team_id__in=TeamMembership.objects.filter(user=user).values("team_id"))


@login_required
def grant_new(request: HttpRequest) -> HttpResponse:
    user = request.user
    errors: dict[str, FieldError] = {}
    refused = ""
    default_end = (timezone.now() + timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    typed: dict[str, str] = {
        "kind": GrantKind.NOMINAL.value,
        "resource": "nvidia.com/gpu",
        "ends_at": default_end.strftime("%Y-%m-%dT%H:%M"),
    }
    status = 200
    if request.method == "POST":
        typed = {key: request.POST.get(key, "") for key in (*FORM_FIELDS, "justification")}
        data = {key: value for key, value in typed.items() if value != "" or key != "lender"}
        if data.get("ends_at") and "+" not in data["ends_at"] and not data["ends_at"].endswith("Z"):
            data["ends_at"] += "Z"  # the form's datetime-local field is in UTC (said beside it)
        try:
            grant = request_grant(user, data)
        except PolicyInvalid as exc:
            errors = {e.field: e for e in exc.errors}
        except NotAllowed as exc:
            record_access_denial(request, reason=AccessDenial.Reason.FORBIDDEN, detail=exc.message)
            refused, status = exc.message, 403
        else:
            messages.success(
                request,
                f"Asked for grant #{grant.pk}: an approver decides it; this page follows it.",
            )
            return redirect("grant", grant.pk)
    context = {
        "queues": _queues_for(user),
        "lenders": ClusterQueue.objects.order_by("name"),
        "flavors": ResourceFlavor.objects.order_by("name"),
        "kinds": GrantKind.choices,
        "errors": errors,
        "refused": refused,
        "typed": typed,
    }
    response = page(request, "frontend/grant_new.html", context, nav="grants", live=False)
    response.status_code = status
    return response


@dataclass
class Outcome:
    """What a posted action came to: done (redirect), refused, or field errors."""

    done: bool = False
    refused: dict[str, str] | None = None
    errors: dict[str, FieldError] = field(default_factory=dict)


def _act(request: HttpRequest, grant: QuotaGrant) -> Outcome:
    user = request.user
    action = request.POST.get("action", "")
    text = request.POST.get("reason" if action in ("reject", "end") else "comment", "")
    try:
        if action == "approve":
            acknowledge = request.POST.get("acknowledge") == "on"
            lifecycle.approve(user, grant.pk, comment=text, acknowledge=acknowledge)
            said = "Approved and applied"
        elif action == "reject":
            lifecycle.reject(user, grant.pk, reason=text)
            said = "Rejected"
        elif action == "end":
            lifecycle.end(user, grant.pk, reason=text)
            said = "Ended" + (" and reverted" if grant.state == GrantState.ACTIVE else "")
        else:
            message = "choose Approve, Reject or End"
            return Outcome(refused={"kind": "invalid", "message": message, "rule": "action"})
    except NotAllowed as exc:
        record_access_denial(request, reason=AccessDenial.Reason.FORBIDDEN, detail=exc.message)
        return Outcome(refused={"kind": "forbidden", "message": exc.message, "rule": exc.rule})
    except PolicyInvalid as exc:
        return Outcome(errors={e.field: e for e in exc.errors})
    except AlreadyDecided as exc:
        return Outcome(refused={"kind": "conflict", "message": exc.message, "rule": exc.rule})
    messages.success(request, f"{said}: grant #{grant.pk}.")
    return Outcome(done=True)


@login_required
def grant_detail(request: HttpRequest, grant_id: int) -> HttpResponse:
    user = request.user
    grant = _grants(user).filter(pk=grant_id).first()
    if grant is None:
        if QuotaGrant.objects.filter(pk=grant_id).exists():
            raise refuse(request, f"quota grant #{grant_id} belongs to another team",
                         message="no such quota grant of yours")  # fmt: skip
        raise Http404("no such quota grant of yours")
    outcome = Outcome()
    status = 200
    if request.method == "POST":
        outcome = _act(request, grant)
        if outcome.done:
            return redirect("grant", grant.pk)
        kind = outcome.refused["kind"] if outcome.refused else ""
        status = {"forbidden": 403, "invalid": 400}.get(kind, 200)
        grant = _grants(user).get(pk=grant.pk)
    impact = grant.impact if isinstance(grant.impact, dict) else {}
    context = {
        "grant": grant,
        "summary": describe(grant),
        "impact": impact,
        "left": (grant.ends_at - timezone.now()).total_seconds(),
        "decide": grant.state == GrantState.PENDING and may_decide(user, grant),
        "end": grant.is_open and may_end(user, grant),
        "whatif": whatif_waits(grant.whatif_run, grant.cluster_queue),
        "whatif_link": grant.whatif_run_id is not None and is_platform_admin(user),
        "errors": outcome.errors,
        "refused": outcome.refused,
        "typed": {
            "comment": request.POST.get("comment", ""),
            "reason": request.POST.get("reason", ""),
        },
    }
    response = page(request, "frontend/grant.html", context, nav="grants")
    response.status_code = status
    return response
