"""Usage and cost (showback): a month's GPU-hours allocated, busy and lost to
preemption and what they cost, per team, workload type and flavor, with the
borrowing between teams; the same report as ``GET /api/v1/reports/usage/``
(``jobs.showback``). Admins see every team; a member sees their own teams,
and asking for another team's is refused as if it did not exist (logged)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone

from frontend.charts.showback import (
    format_hours,
    format_money,
    format_share,
    usage_cost,
    usage_hours,
)
from frontend.views.common import page
from jobs.showback import (
    DIMENSIONS,
    Month,
    parse_group_by,
    parse_month,
    report_dict,
    usage_report,
    visible_team_slugs,
)
from queues.access import refuse
from queues.models import Team

LABELS = {"team": "Team", "type": "Workload type", "flavor": "Flavor"}
NO_TEAM = "(no team)"


def _shown_key(name: str, value: str) -> str:
    if name == "team" and not value:
        return NO_TEAM
    return value or "—"


def _counterparts(pairs: list[dict[str, Any]] | None) -> str:
    if not pairs:
        return "—"
    return ", ".join(
        f"{pair['team'] or 'shared queues'} {format_hours(pair['gpu_hours'])}" for pair in pairs
    )


def _figures(figures: dict[str, Any], currency: str) -> dict[str, str]:
    """One row's figures as the page writes them: never a raw float."""
    return {
        "allocated": format_hours(figures["allocated_gpu_hours"]),
        "busy": format_hours(figures["busy_gpu_hours"]),
        "busy_share": format_share(figures["busy_gpu_hours"], figures["measured_gpu_hours"]),
        "lost": format_hours(figures["lost_gpu_hours"]),
        "unpriced": format_hours(figures["unpriced_gpu_hours"])
        if figures["unpriced_gpu_hours"]
        else "",
        "cost": format_money(figures["cost"], currency),
        "lost_cost": format_money(figures["lost_cost"], currency),
        "borrowed": format_hours(figures["borrowed_gpu_hours"]),
        "lent": format_hours(figures["lent_gpu_hours"]),
        "borrowed_from": _counterparts(figures["borrowed_from"]),
        "lent_to": _counterparts(figures["lent_to"]),
    }


def _group_by(request: HttpRequest) -> str | None:
    """The page's checkboxes (``group_by`` once per dimension, in the page's
    order) or the API's comma-separated list; None when absent."""
    values = request.GET.getlist("group_by")
    if not values:
        return None
    return ",".join(values)


def _months_around(month: Month, count: int = 12) -> list[str]:
    found = []
    year, number = month.year, month.month
    for _ in range(count):
        found.append(f"{year:04d}-{number:02d}")
        year, number = (year - 1, 12) if number == 1 else (year, number - 1)
    return found


@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    month, month_errors = parse_month(request.GET.get("month") or None, now)
    group_by, group_errors = parse_group_by(_group_by(request))
    team = request.GET.get("team") or None
    visible = visible_team_slugs(request.user)
    if team is not None and visible is not None and team not in visible:
        raise refuse(request, f"usage report of team {team}: not a member")
    errors = month_errors + group_errors
    context: dict[str, Any] = {
        "dimensions": [(name, LABELS[name]) for name in DIMENSIONS],
        "errors": errors,
        "team": team or "",
        "teams": sorted(visible)
        if visible is not None
        else list(Team.objects.order_by("slug").values_list("slug", flat=True)),
        "member_of_none": visible is not None and not visible,
    }
    if errors or month is None:
        context |= {
            "month": request.GET.get("month", ""),
            "group_by": [],
            "months": _months_around(Month.of(now)),
        }
        response = page(request, "frontend/usage.html", context, nav="usage", live=False)
        response.status_code = 400
        return response
    report = usage_report(request.user, month, group_by, teams=None if team is None else [team])
    answer = report_dict(report)
    currency = answer["currency"]
    rows = []
    for row in answer["rows"]:
        keys = [_shown_key(name, row[name]) for name in group_by]
        rows.append(
            {
                "keys": keys,
                "label": " · ".join(keys),
                "shown": _figures(row, currency),
                "figures": row,
            }
        )
    group = " · ".join(LABELS[name].lower() for name in group_by)
    query = [("month", month.label), ("group_by", ",".join(group_by))]
    if team:
        query.append(("team", team))
    context |= {
        "month": month.label,
        "months": _months_around(Month.of(now)),
        "group_by": list(group_by),
        "headers": [LABELS[name] for name in group_by],
        "rows": rows,
        "totals": _figures(answer["totals"], currency),
        "currency": currency,
        "busy_source": answer["busy_source"],
        "as_of": answer["as_of"],
        "by_type": "type" in group_by,
        # Whom from and to is listed for a few teams at a time (jobs.showback).
        "counterparts_listed": answer["totals"]["borrowed_gpu_hours"] is None
        or any(row["borrowed_from"] is not None for row in answer["rows"]),
        "hours_chart": usage_hours(
            [{**r["figures"], "label": r["label"]} for r in rows], group=group
        ),
        "cost_chart": usage_cost(
            [{**r["figures"], "label": r["label"]} for r in rows], currency=currency, group=group
        ),
        "unpriced": any(r["figures"]["unpriced_gpu_hours"] for r in rows),
        "csv_url": reverse("usage-report") + "?" + urlencode([*query, ("format", "csv")]),
    }
    return page(request, "frontend/usage.html", context, nav="usage", live=False, charts=True)
