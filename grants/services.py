"""Quota grant writes: ask, decide once, apply, end and revert.

Every state change is compare-and-set on ``state``. Approving and ending hold
the policy write lock (``policy_write``) for the whole change, so the grant's
state and the policy change it brings commit together or not at all, and two
approvers pressing at once are served one after the other: the second finds
the grant no longer pending and is told who decided (409 ``already-decided``).
The history entries of the policy change carry a note naming the grant.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from grants.access import check_may_request
from grants.impact import grant_impact
from grants.models import GPU, GrantKind, GrantState, QuotaGrant
from grants.policy import BORROWING, NOMINAL, current
from queues.deferred import after_commit
from queues.errors import FieldError, PolicyConflict, PolicyInvalid, raise_if
from queues.models import ClusterQueue
from queues.quantity import QuantityError, format_canonical, to_canonical
from whatif.service import create_run

log = logging.getLogger(__name__)
MAX_TEXT = 4000
MAX_WINDOW = timedelta(days=31)
# Tells the deciders after the commit (grants.notify); a notice that cannot
# be queued is logged, and the grant still waits on /grants/ for them.
NOTIFY_GRANT = "grants.tasks.notify_grant"
FIELDS = ("cluster_queue", "kind", "flavor", "resource", "amount", "lender", "ends_at")


class AlreadyDecided(PolicyConflict):
    """Someone decided first, or the grant is no longer in the state asked about."""


def when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def already(grant: QuotaGrant, doing: str) -> AlreadyDecided:
    who = grant.decided_by.get_username() if grant.decided_by else "Berth"
    message = f"quota grant #{grant.pk} cannot be {doing}: it is {grant.state}"
    if grant.state in (GrantState.ACTIVE, GrantState.REJECTED, GrantState.ENDED):
        message += f" (decided by {who} at {when(grant.decided_at)})"
    return AlreadyDecided(message, "already-decided", {"state": [grant.state]})


def describe(grant: QuotaGrant) -> str:
    amount = format_canonical(grant.resource, grant.amount)
    what = {
        GrantKind.NOMINAL: "nominal quota",
        GrantKind.BORROWING: "borrowing limit",
        GrantKind.LOAN: f"nominal quota, lent by {grant.lender}",
    }.get(GrantKind(grant.kind), grant.kind)
    return (
        f"+{amount} {grant.flavor} {grant.resource} {what} for {grant.cluster_queue} "
        f"until {when(grant.ends_at)}"
    )


# --------------------------------------------------------------------------- asking


@dataclass
class _Checked:
    queue: ClusterQueue
    lender: ClusterQueue | None
    kind: str
    flavor: str
    resource: str
    amount: int
    ends_at: datetime
    justification: str


def _check(data: dict[str, Any], now: datetime) -> _Checked:
    """Every rule of a request; PolicyInvalid names each field at fault."""
    errors: list[FieldError] = []
    unknown = sorted(set(data) - {*FIELDS, "justification"})
    errors += [
        FieldError(key, "unknown-field", f"is not a field of a grant; known: {', '.join(FIELDS)}")
        for key in unknown
    ]
    text = lambda key: str(data.get(key) or "").strip()  # noqa: E731
    for key in ("cluster_queue", "flavor", "amount", "ends_at", "justification"):
        if not text(key):
            errors.append(FieldError(key, "required", "is required"))
    kind = text("kind") or GrantKind.NOMINAL.value
    if kind not in GrantKind.values:
        errors.append(
            FieldError("kind", "unsupported-value", f"use one of {', '.join(GrantKind.values)}")
        )
    resource = text("resource") or GPU
    queue = (
        ClusterQueue.objects.select_related("team", "cohort")
        .filter(name=text("cluster_queue"))
        .first()
    )
    if text("cluster_queue") and queue is None:
        errors.append(
            FieldError(
                "cluster_queue",
                "unknown-reference",
                f"there is no cluster queue {text('cluster_queue')!r}",
            )
        )
    if queue is not None and queue.team_id is None:
        errors.append(
            FieldError(
                "cluster_queue",
                "team-queue-required",
                f"{queue.name} is shared by every team: a grant is extra quota for one "
                "team's own cluster queue",
            )
        )
    amount = 0
    if text("amount"):
        try:
            amount = to_canonical(resource, text("amount"))
        except QuantityError as bad:
            errors.append(FieldError("amount", "quantity", str(bad)))
        else:
            if amount <= 0:
                errors.append(FieldError("amount", "positive", "must be more than zero"))
    ends_at = _moment(text("ends_at"))
    if text("ends_at") and ends_at is None:
        errors.append(
            FieldError("ends_at", "datetime", "an ISO 8601 time, e.g. 2026-12-04T18:00:00Z")
        )
    if ends_at is not None:
        if ends_at.tzinfo is None:
            ends_at = ends_at.replace(tzinfo=UTC)
        if ends_at <= now:
            errors.append(FieldError("ends_at", "in-the-future", "must be in the future"))
        elif ends_at - now > MAX_WINDOW:
            errors.append(
                FieldError("ends_at", "max-window", f"at most {MAX_WINDOW.days} days from now")
            )
    if len(text("justification")) > MAX_TEXT:
        errors.append(FieldError("justification", "max-length", f"at most {MAX_TEXT} characters"))
    lender = None
    if kind == GrantKind.LOAN:
        lender = _lender(text("lender"), queue, errors)
    elif text("lender"):
        errors.append(FieldError("lender", "only-for-loans", "name a lender only with kind=loan"))
    if queue is not None and text("flavor") and not errors:
        _quota_rules(queue, lender, kind, text("flavor"), resource, amount, errors)
    raise_if(errors)
    assert queue is not None and ends_at is not None
    return _Checked(
        queue, lender, kind, text("flavor"), resource, amount, ends_at, text("justification")
    )


def _moment(value: str) -> datetime | None:
    """An ISO 8601 time, or None; a well-shaped impossible one (month 13) too."""
    try:
        return parse_datetime(value) if value else None
    except ValueError:
        return None


def _lender(name: str, queue: ClusterQueue | None, errors: list[FieldError]) -> ClusterQueue | None:
    if not name:
        errors.append(FieldError("lender", "required", "a loan names its lender cluster queue"))
        return None
    lender = ClusterQueue.objects.select_related("team").filter(name=name).first()
    if lender is None:
        errors.append(
            FieldError("lender", "unknown-reference", f"there is no cluster queue {name!r}")
        )
    elif queue is not None and lender.pk == queue.pk:
        errors.append(FieldError("lender", "not-self", "a queue cannot lend to itself"))
    return lender


def _quota_rules(
    queue: ClusterQueue,
    lender: ClusterQueue | None,
    kind: str,
    flavor: str,
    resource: str,
    amount: int,
    errors: list[FieldError],
) -> None:
    if current(queue, flavor, resource, NOMINAL) is None:
        errors.append(
            FieldError(
                "flavor",
                "no-quota",
                f"{queue.name} has no {flavor} {resource} quota: add the flavor to it first",
            )
        )
        return
    if kind == GrantKind.BORROWING:
        if queue.cohort_id is None:
            errors.append(
                FieldError(
                    "kind", "needs-cohort", f"{queue.name} is in no cohort: nobody to borrow from"
                )
            )
        elif current(queue, flavor, resource, BORROWING) is None:
            errors.append(
                FieldError(
                    "kind",
                    "no-limit",
                    f"{queue.name} may already borrow without limit on {flavor} {resource}",
                )
            )
    if lender is not None:
        lent = current(lender, flavor, resource, NOMINAL)
        if lent is None:
            errors.append(
                FieldError("lender", "no-quota", f"{lender.name} has no {flavor} {resource} quota")
            )
        elif lent < amount:
            errors.append(
                FieldError(
                    "amount",
                    "exceeds-lender",
                    f"{lender.name} has {format_canonical(resource, lent)} {flavor} {resource} "
                    "nominal quota: it cannot lend more",
                )
            )


def _proposal(checked: _Checked) -> list[dict[str, str]]:
    """The grant as what-if changes: the fields' values once it is applied."""
    field = BORROWING if checked.kind == GrantKind.BORROWING else NOMINAL
    before = current(checked.queue, checked.flavor, checked.resource, field) or 0
    fmt = lambda n: format_canonical(checked.resource, n)  # noqa: E731
    rows = [
        {
            "cluster_queue": checked.queue.name,
            "field": field,
            "flavor": checked.flavor,
            "resource": checked.resource,
            "value": fmt(before + checked.amount),
        }
    ]
    if checked.lender is not None:
        lent = current(checked.lender, checked.flavor, checked.resource, NOMINAL) or 0
        rows.append(
            {**rows[0], "cluster_queue": checked.lender.name, "value": fmt(lent - checked.amount)}
        )
    return rows


def request_grant(user: Any, data: dict[str, Any]) -> QuotaGrant:
    """Store a pending grant with its impact and a what-if run of its changes.
    PolicyInvalid (nothing stored) names every field at fault; NotAllowed
    unless ``user`` may ask for the queue's team."""
    now = timezone.now()
    checked = _check(dict(data), now)
    assert checked.queue.team is not None
    check_may_request(user, checked.queue.team)
    impact = grant_impact(
        cluster_queue=checked.queue,
        kind=checked.kind,
        flavor=checked.flavor,
        resource=checked.resource,
        amount=checked.amount,
        lender=checked.lender,
        now=now,
    )
    with transaction.atomic():
        run = None
        try:
            run = create_run(user, source="window", changes=_proposal(checked))
        except PolicyInvalid as refused:
            # No replay (say, no recorded load in the window): the grant is
            # still decidable, and the impact says why there is no what-if.
            impact["whatif_error"] = str(refused)
        grant = QuotaGrant.objects.create(
            team=checked.queue.team,
            requester=user if getattr(user, "is_authenticated", False) else None,
            cluster_queue=checked.queue.name,
            kind=checked.kind,
            lender=checked.lender.name if checked.lender else "",
            flavor=checked.flavor,
            resource=checked.resource,
            amount=checked.amount,
            justification=checked.justification,
            created_at=now,
            ends_at=checked.ends_at,
            impact=impact,
            whatif_run=run,
        )
        after_commit(NOTIFY_GRANT, grant.pk, stored=f"quota grant #{grant.pk}: stored")
        return grant
