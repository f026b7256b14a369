"""Telling the deciders of a new grant: e-mail to the global approvers (the
platform admins when there is none), never the requester, and the approvals'
webhook, through ``approvals.notify.send_notice``. Sent by a task after the
request commits; what reached whom, or failed, is logged (a grant nobody was
told of still shows on ``/grants/`` for every decider)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q

from accounts.roles import APPROVERS_GROUP, PLATFORM_ADMINS_GROUP
from approvals.notify import reached, send_notice
from grants.models import QuotaGrant
from grants.services import describe

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
