"""Approvals for ``urgent-release`` jobs: the inbox (what waits for your
decision first, then what others decide, then what was decided lately), one
request's page (its impact preview, audit trail and, for someone who may
decide it, the Approve and Reject forms) and the audit history with a CSV
export.

Who sees and decides what is ``approvals.access``'s business: a request
outside ``visible_to(user)`` does not exist (404), and the approvals pages
exist only for an approver, a platform admin, or someone with a request to
follow. The forms go through ``approvals.decide``, which refuses without
changing anything or decides once; the page only says what happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import IO, Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from accounts.models import AccessDenial
from accounts.services import record_access_denial
from approvals.access import (
    NotAllowed,
    check_may_decide,
    decidable_now,
    is_approver_anywhere,
    visible_to,
)
from approvals.decide import AlreadyDecided, decide
from approvals.history import history_events, history_rows, write_csv
from approvals.models import ApprovalRequest, ApprovalState
from frontend.views.common import page, paginate, query_without
from jobs import selectors as job_selectors
from queues.access import refuse
from queues.errors import FieldError, PolicyInvalid

RECENT = 20  # decided requests on the inbox's first tab
TABS: tuple[tuple[str, str], ...] = (
    ("", "Inbox"),
    (ApprovalState.PENDING.value, "Pending"),
    (ApprovalState.APPROVED.value, "Approved"),
    (ApprovalState.REJECTED.value, "Rejected"),
    (ApprovalState.EXPIRED.value, "Expired"),
    (ApprovalState.WITHDRAWN.value, "Withdrawn"),
    ("all", "All"),
)
DATE_FORMAT = "%Y-%m-%d"


# ------------------------------------------------------------------ who sees


def may_open_inbox(user: Any) -> bool:
    """An approver anywhere (admins included), or someone with a request to follow."""
    if not getattr(user, "is_authenticated", False):
        return False
    return is_approver_anywhere(user) or visible_to(user).exists()


def _gate(request: HttpRequest) -> None:
    if not may_open_inbox(request.user):
        raise refuse(request, "approvals are for approvers and the teams whose jobs wait for one")


@dataclass(frozen=True)
class Summary:
    """What the nav badge and the overview card say about approvals."""

    show: bool  # the inbox exists for this user
    approver: bool
    to_decide: int  # pending requests this user may decide
    oldest: ApprovalRequest | None  # the one of those waiting longest
    following: int  # pending requests this user may only watch (their teams')


NOTHING = Summary(show=False, approver=False, to_decide=0, oldest=None, following=0)


def summary(user: Any) -> Summary:
    if not getattr(user, "is_authenticated", False):
        return NOTHING
    visible = visible_to(user)
    pending = visible.filter(state=ApprovalState.PENDING)
    if not is_approver_anywhere(user):
        seen = visible.order_by().aggregate(
            total=Count("id"), pending=Count("id", filter=Q(state=ApprovalState.PENDING))
        )
        return Summary(
            show=bool(seen["total"]),
            approver=False,
            to_decide=0,
            oldest=None,
            following=seen["pending"],
        )
    mine = decidable_now(user)
    to_decide = mine.count()
    oldest = mine.select_related("team").order_by("created_at", "id").first() if to_decide else None
    return Summary(
        show=True,
        approver=True,
        to_decide=to_decide,
        oldest=oldest,
        following=pending.exclude(pk__in=mine.values("pk")).count(),
    )


def summary_for(request: HttpRequest) -> Summary:
    """``summary(request.user)``, worked out once per request (nav and overview)."""
    cached = getattr(request, "_berth_approvals", None)
    if cached is None:
        cached = summary(request.user)
        request._berth_approvals = cached  # type: ignore[attr-defined]
    return cached


# -------------------------------------------------------------------- inbox


def _row(approval: ApprovalRequest, now: datetime, decidable: set[int]) -> dict[str, Any]:
    impact = approval.impact if isinstance(approval.impact, dict) else {}
    return {
        "r": approval,
        "left": (approval.expires_at - now).total_seconds(),
        "decidable": approval.pk in decidable,
        "summary": impact.get("summary") or "",
        "gpu_hours_lost": impact.get("gpu_hours_lost") or 0,
        "victims": len(impact.get("preempts") or []),
    }


def _requests(user: Any) -> Any:
    return visible_to(user).select_related("team", "requester", "decided_by", "job")


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    _gate(request)
    user = request.user
    now = timezone.now()
    visible = _requests(user)
    decidable = set(decidable_now(user).values_list("pk", flat=True))
    tab = request.GET.get("state", "")
    if tab not in {value for value, _ in TABS}:
        tab = ""
    counts = dict(visible.order_by().values_list("state").annotate(n=Count("id")))
    context: dict[str, Any] = {
        "tab": tab,
        "tabs": [
            {
                "value": value,
                "label": label,
                "count": len(decidable)
                if value == ""
                else sum(counts.values())
                if value == "all"
                else counts.get(value, 0),
            }
            for value, label in TABS
        ],
        "approver": is_approver_anywhere(user),
    }
    if tab == "":
        pending = [
            _row(r, now, decidable)
            for r in visible.filter(state=ApprovalState.PENDING).order_by("expires_at", "id")
        ]
        context["to_decide"] = [row for row in pending if row["decidable"]]
        context["following"] = [row for row in pending if not row["decidable"]]
        context["recent"] = [
            _row(r, now, decidable)
            for r in visible.exclude(state=ApprovalState.PENDING).order_by("-decided_at", "-id")[
                :RECENT
            ]
        ]
    else:
        chosen = visible if tab == "all" else visible.filter(state=tab)
        if tab == ApprovalState.PENDING:
            chosen = chosen.order_by("expires_at", "id")
        else:
            chosen = chosen.order_by("-created_at", "-id")
        listed = paginate(request, chosen)
        context["page"] = listed
        context["rows"] = [_row(r, now, decidable) for r in listed.object_list]
        context["page_query"] = query_without(request, "page")
        context["last"] = {
            ApprovalState.PENDING.value: "Time left",
            "all": "Time left or decision",
        }.get(tab, "Decided")
    return page(request, "frontend/approvals.html", context, nav="approvals")


# ------------------------------------------------------------------ request


def _victims(user: Any, impact: dict[str, Any]) -> list[dict[str, Any]]:
    """The impact preview's rows, each with a link to its job when ``user`` may see it."""
    rows = [dict(r) for r in impact.get("preempts") or [] if isinstance(r, dict)]
    ids: set[int] = {r["job_id"] for r in rows if isinstance(r.get("job_id"), int)}
    seen = set(job_selectors.jobs_for(user).filter(pk__in=ids).values_list("pk", flat=True))
    for row in rows:
        row["job_link"] = row.get("job_id") in seen
    return rows


def _moment(value: Any) -> datetime | None:
    try:
        return parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _decision_rights(user: Any, approval: ApprovalRequest) -> tuple[bool, str]:
    """(may decide it, and if not, why) — for showing the forms, not for deciding."""
    try:
        check_may_decide(user, approval)
    except NotAllowed as exc:
        return False, exc.message
    return True, ""


@login_required
def detail(request: HttpRequest, approval_id: int) -> HttpResponse:
    user = request.user
    approval = _requests(user).select_related("reapproval_of").filter(pk=approval_id).first()
    if approval is None:
        if ApprovalRequest.objects.filter(pk=approval_id).exists():
            raise refuse(
                request,
                f"approval #{approval_id} belongs to another team",
                message="no such approval request of yours",
            )
        raise Http404("no such approval request of yours")
    status = 200
    errors: dict[str, FieldError] = {}
    refused: dict[str, str] | None = None
    typed = {"comment": "", "reason": ""}
    if request.method == "POST":
        action = request.POST.get("action", "")
        approve = action == "approve"
        field = "comment" if approve else "reason"
        text = request.POST.get(field, "")
        if action not in ("approve", "reject"):
            status = 400
            refused = {"kind": "invalid", "message": "choose Approve or Reject", "rule": "action"}
        else:
            try:
                decided = decide(user, approval.pk, approve=approve, comment=text)
            except NotAllowed as exc:
                record_access_denial(
                    request, reason=AccessDenial.Reason.FORBIDDEN, detail=exc.message
                )
                status = 403
                refused = {"kind": "forbidden", "message": exc.message, "rule": exc.rule}
            except PolicyInvalid as exc:
                # Re-rendered with the error by its field (200, as the dashboard's
                # other forms do); nothing was changed.
                errors = {e.field: e for e in exc.errors}
                typed[field] = text
            except AlreadyDecided as exc:
                refused = {"kind": "conflict", "message": exc.message, "rule": exc.rule}
            else:
                verb = "Approved" if approve else "Rejected"
                messages.success(
                    request,
                    f"{verb} approval #{decided.pk} ({decided.workload_key}). Berth writes the "
                    "decision to the Workload's admission check.",
                )
                return redirect("approval", decided.pk)
        approval = _requests(user).select_related("reapproval_of").get(pk=approval.pk)
    may_decide, why_not = _decision_rights(user, approval)
    impact = approval.impact if isinstance(approval.impact, dict) else {}
    now = timezone.now()
    context = {
        "approval": approval,
        "left": (approval.expires_at - now).total_seconds(),
        "impact": impact,
        "impact_computed": _moment(impact.get("computed_at")),
        "victims": _victims(user, impact),
        "events": approval.events.select_related("actor").order_by("at", "id"),
        "job_visible": approval.job_id is not None
        and job_selectors.jobs_for(user).filter(pk=approval.job_id).exists(),
        "attempts": _requests(user)
        .filter(workload_uid=approval.workload_uid)
        .exclude(pk=approval.pk)
        .order_by("-attempt"),
        "forms": may_decide
        and approval.state == ApprovalState.PENDING
        and approval.expires_at > now,
        "why_not": why_not,
        "errors": errors,
        "refused": refused,
        "typed": typed,
    }
    response = page(request, "frontend/approval.html", context, nav="approvals")
    response.status_code = status
    return response


# ------------------------------------------------------------------ history


def _date(request: HttpRequest, name: str, errors: list[FieldError]) -> date | None:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    try:
        return datetime.strptime(raw, DATE_FORMAT).date()
    except ValueError:
        errors.append(FieldError(name, "date", f"a date as YYYY-MM-DD (got {raw!r})"))
        return None


def history_filters(request: HttpRequest) -> tuple[dict[str, Any], list[FieldError]]:
    """``history_events`` keyword arguments from ``?queue=&team=&since=&until=``
    (dates in UTC, both days included), and what was wrong with them."""
    errors: list[FieldError] = []
    since, until = _date(request, "since", errors), _date(request, "until", errors)
    if since is not None and until is not None and until < since:
        errors.append(FieldError("until", "after-since", "must not be before since"))
    return {
        "cluster_queue": request.GET.get("queue", "").strip() or None,
        "team": request.GET.get("team", "").strip() or None,
        "since": datetime.combine(since, time.min, tzinfo=UTC) if since else None,
        "until": datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC)
        if until
        else None,
    }, errors


def _without_page(request: HttpRequest) -> str:
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()


@login_required
def history(request: HttpRequest) -> HttpResponse:
    _gate(request)
    filters, errors = history_filters(request)
    visible = visible_to(request.user).order_by()
    events = history_events(request.user, **filters) if not errors else None
    listed = paginate(request, events) if events is not None else None
    job_ids = {e.request.job_id for e in listed.object_list} if listed is not None else set()
    context = {
        "page": listed,
        "visible_jobs": set(
            job_selectors.jobs_for(request.user)
            .filter(pk__in=job_ids - {None})
            .values_list("pk", flat=True)
        ),
        "errors": errors,
        "field_errors": {e.field: e for e in errors},
        "queues": sorted(set(visible.values_list("cluster_queue", flat=True))),
        "teams": sorted(
            set(visible.filter(team__isnull=False).values_list("team__slug", flat=True))
        ),
        "filters": {
            name: request.GET.get(name, "") for name in ("queue", "team", "since", "until")
        },
        "csv_query": _without_page(request),
        "page_query": query_without(request, "page"),
    }
    return page(request, "frontend/approvals_history.html", context, nav="approvals")


@login_required
def history_csv(request: HttpRequest) -> HttpResponse:
    """The history page's events (same filters) as CSV, history.CSV_COLUMNS."""
    _gate(request)
    filters, errors = history_filters(request)
    if errors:
        return HttpResponse(
            "".join(f"{e.field}: {e.message} (rule {e.rule})\n" for e in errors),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="berth-approvals-{stamp}.csv"'
    # csv only calls write(), which an HttpResponse has.
    out = cast(IO[str], response)
    write_csv(history_rows(history_events(request.user, **filters).iterator()), out)
    return response
