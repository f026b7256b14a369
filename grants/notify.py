"""Telling the deciders of a new grant: e-mail to the global approvers (the
platform admins when there is none), never the requester, and the approvals'
webhook, through ``approvals.notify.send_notice``; and telling the requester
what became of it (approved, rejected, ended, expired), unless they did it
themselves. Sent by tasks after the change commits; what reached whom, or
failed, is logged (a grant nobody was told of still shows on ``/grants/``)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q

from accounts.roles import APPROVERS_GROUP, PLATFORM_ADMINS_GROUP
from approvals.notify import reached, send_notice
from grants.models import GrantState, QuotaGrant
from grants.services import describe, when

log = logging.getLogger(__name__)


def grant_url(grant: QuotaGrant) -> str:
    return f"{settings.BERTH_PUBLIC_URL}/grants/{grant.pk}/"


def deciders(grant: QuotaGrant) -> dict[str, str]:
    """Username → e-mail address of those to tell (those with an address)."""
    users = get_user_model().objects.filter(is_active=True).exclude(pk=grant.requester_id or 0)
    found = users.filter(groups__name=APPROVERS_GROUP)
    if not found.exists():
        found = users.filter(Q(is_superuser=True) | Q(groups__name=PLATFORM_ADMINS_GROUP))
    return {u.get_username(): u.email for u in found.distinct().order_by("username") if u.email}


def notify_requested(grant_id: int) -> dict[str, Any]:
    """Tell the deciders of grant ``grant_id``; returns what was sent."""
    grant = QuotaGrant.objects.select_related("team", "requester").get(pk=grant_id)
    who = grant.requester.get_username() if grant.requester else "someone"
    headline = f"Quota grant #{grant.pk} asked by {who}: {describe(grant)}"
    impact = (grant.impact or {}).get("summary", "not computed")
    body = (
        f"{headline}\n\nJustification: {grant.justification}\nImpact: {impact}\n\n"
        f"Decide in Berth: {grant_url(grant)}\n"
    )
    payload = {
        "text": f"{headline}. {impact}",
        "berth": {
            "event": "quota-grant-requested",
            "grant_id": grant.pk,
            "team": grant.team.slug if grant.team else None,
            "cluster_queue": grant.cluster_queue,
            "summary": describe(grant),
            "ends_at": grant.ends_at.isoformat(),
            "url": grant_url(grant),
        },
    }
    sent, failures = send_notice(
        subject=headline, body=body, people=deciders(grant), payload=payload
    )
    log.info("quota grant #%s: told %s", grant.pk, reached(sent) or "nobody")
    for failure in failures:
        log.warning("quota grant #%s: notice failed: %s", grant.pk, failure)
    return sent


def _outcome(grant: QuotaGrant) -> tuple[str, str] | None:
    """(what happened, who did it) for a grant that left pending; None while
    it is pending."""
    decider = grant.decided_by.get_username() if grant.decided_by else ""
    if grant.state == GrantState.ACTIVE:
        note = f": {grant.comment}" if grant.comment else ""
        return f"approved by {decider} and applied until {when(grant.ends_at)}{note}", decider
    if grant.state == GrantState.REJECTED:
        return f"rejected by {decider}: {grant.comment}", decider
    if grant.state == GrantState.EXPIRED:
        return "expired: nobody decided before its end", ""
    if grant.state == GrantState.ENDED:
        ender = grant.ended_by.get_username() if grant.ended_by else ""
        undone = "reverted" if grant.applied_at else "withdrawn"
        return f"ended ({grant.end_reason}): {undone}", ender
    return None


def notify_outcome(grant_id: int) -> dict[str, Any]:
    """Tell the requester of grant ``grant_id`` what became of it, unless they
    did it themselves; returns what was sent."""
    grant = QuotaGrant.objects.select_related("team", "requester", "decided_by", "ended_by").get(
        pk=grant_id
    )
    outcome = _outcome(grant)
    requester = grant.requester
    if outcome is None or requester is None:
        return {"email": [], "emailed": []}
    happened, actor = outcome
    people = (
        {requester.get_username(): requester.email}
        if requester.email and actor != requester.get_username()
        else {}
    )
    headline = f"Quota grant #{grant.pk} {happened}"
    body = f"{headline}\n\n{describe(grant)}\n\n{grant_url(grant)}\n"
    payload = {
        "text": headline,
        "berth": {
            "event": f"quota-grant-{grant.state}",
            "grant_id": grant.pk,
            "team": grant.team.slug if grant.team else None,
            "cluster_queue": grant.cluster_queue,
            "summary": describe(grant),
            "url": grant_url(grant),
        },
    }
    sent, failures = send_notice(subject=headline, body=body, people=people, payload=payload)
    log.info("quota grant #%s (%s): told %s", grant.pk, grant.state, reached(sent) or "nobody")
    for failure in failures:
        log.warning("quota grant #%s: notice failed: %s", grant.pk, failure)
    return sent
