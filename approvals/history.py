"""The approvals history: every audit event a user may see, newest first, as
rows for the history page, the API and the CSV export (one shape for all)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import IO, Any

from django.db.models import QuerySet

from approvals.access import visible_to
from approvals.models import ApprovalEvent
from jobs.models import JobRequest

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CSV_COLUMNS = (
    "at",
    "approval_id",
    "action",
    "actor",
    "request_state",
    "workload",
    "cluster_queue",
    "team",
    "requester",
    "gpus",
    "job_id",
    "message",
)


def history_events(
    user: Any,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    cluster_queue: str | None = None,
    team: str | None = None,
) -> QuerySet[ApprovalEvent]:
    """Audit events of the requests ``user`` may see, newest first."""
    events = ApprovalEvent.objects.filter(request__in=visible_to(user)).select_related(
        "actor", "request", "request__team", "request__requester"
    )
    if since is not None:
        events = events.filter(at__gte=since)
    if until is not None:
        events = events.filter(at__lt=until)
    if cluster_queue:
        events = events.filter(request__cluster_queue=cluster_queue)
    if team:
        events = events.filter(request__team__slug=team)
    return events.order_by("-at", "-id")


def history_row(event: ApprovalEvent) -> dict[str, Any]:
    request = event.request
    return {
        "at": event.at.isoformat(),
        "approval_id": request.pk,
        "action": event.action,
        "actor": event.actor.get_username() if event.actor else "",
        "request_state": request.state,
        "workload": request.workload_key,
        "cluster_queue": request.cluster_queue,
        "team": request.team.slug if request.team else "",
        "requester": request.requester.get_username() if request.requester else "",
        "gpus": request.gpus,
        "job_id": request.job_id,
        "message": event.message,
    }


def history_rows(events: Iterable[ApprovalEvent]) -> Iterator[dict[str, Any]]:
    for event in events:
        yield history_row(event)


def write_csv(rows: Iterable[dict[str, Any]], out: IO[str]) -> None:
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        # A cell starting with = + - @ (or a tab or CR) is a formula to
        # spreadsheets: quote it.
        writer.writerow(
            {
                k: ("'" + v if isinstance(v, str) and v[:1] in FORMULA_STARTS else v)
                for k, v in row.items()
            }
        )


def job_timeline_steps(job: JobRequest) -> list[dict[str, Any]]:
    """A job's approval steps (requested, approved, …) for its timeline."""
    return [
        {
            "type": f"approval-{event.action}",
            "at": event.at,
            "reason": event.request.state,
            "message": event.message,
            "details": {
                "approval_id": event.request_id,
                "actor": event.actor.get_username() if event.actor else None,
            },
        }
        for event in ApprovalEvent.objects.filter(request__job=job)
        .select_related("actor", "request")
        .order_by("at", "id")
    ]
