"""Telling people a team is starved of its fair share, and when it no longer
is (docs/fairness.md). Each pass refreshes every team's figures
(``cluster.fairness.refresh``), then follows each team's starvation episode:
one notice when it begins, one "cleared" notice when it ends, on the approval
channels (e-mail and the approval webhook, ``approvals.notify``).

An episode begins when the team is below its threshold over the last hour
while work of it waits, and ends when it is not (served, or nothing waits).
Both moves are compare-and-set on ``TeamFairness.starved_since``, so two
passes at once announce an episode once. A notice that fails is logged and
kept on the row (``last_notice_result``); the episode moves on regardless, so
a broken webhook never repeats a notice every minute.

Told: the team's approvers and the platform admins with an e-mail address."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F, Q
from django.utils import timezone

from accounts.roles import PLATFORM_ADMINS_GROUP
from approvals.notify import reached, send_notice
from cluster.fairness import ALERT_WINDOW, is_starved, refresh, starved_below
from queues.choices import TeamRole
from queues.models import TeamFairness

log = logging.getLogger(__name__)
WINDOW_WORDS = {"1h": "the last hour", "24h": "the last 24 hours", "7d": "the last 7 days"}
STARVED, CLEARED = "starved", "cleared"


def team_url(slug: str) -> str:
    return f"{settings.BERTH_PUBLIC_URL}/teams/{slug}/"


def percent(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio * 100:.0f} %"


def _recipients(row: TeamFairness) -> dict[str, str]:
    """Username → address of the team's approvers and the platform admins."""
    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .exclude(email="")
        .filter(
            Q(is_superuser=True)
            | Q(groups__name=PLATFORM_ADMINS_GROUP)
            | Q(team_memberships__team_id=row.team_id, team_memberships__role=TeamRole.APPROVER)
        )
        .distinct()
        .order_by("username")
    )
    return {u.get_username(): u.email for u in users}


def _notice(
    row: TeamFairness, kind: str, since: datetime | None
) -> tuple[str, str, dict[str, Any]]:
    """Subject, body and webhook payload of a starved or cleared notice."""
    slug = row.team.slug
    figures = (row.figures or {}).get(ALERT_WINDOW, {})
    ratio = figures.get("ratio")
    threshold = starved_below(row)
    over = WINDOW_WORDS[ALERT_WINDOW]
    if kind == STARVED:
        subject = f"Team {slug} is starved of its fair share ({percent(ratio)} of it)"
        text = (
            f"Team {slug} is starved of its fair share: over {over} it received "
            f"{figures.get('received', 0):.1f} GPU-hours of the {figures.get('deserved', 0):.1f} "
            f"it deserved while it had work waiting ({percent(ratio)}, below "
            f"{percent(float(threshold))}); {row.waiting_gpus} GPUs of its work wait now."
        )
    else:
        began = f" since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if since else ""
        why = (
            "nothing of it waits now"
            if row.waiting_gpus == 0
            else f"it received {percent(ratio)} of its share over {over}"
        )
        subject = f"Team {slug} is no longer starved"
        text = f"Team {slug}, starved of its fair share{began}, no longer is: {why}."
    body = "\n".join([text, "", team_url(slug)])
    payload = {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"<{team_url(slug)}|Team {slug} in Berth>"}
                ],
            },
        ],
        "berth": {
            "fair_share": kind,
            "team": slug,
            "window": ALERT_WINDOW,
            "ratio": ratio,
            "starved_below": float(threshold),
            "received_gpu_hours": figures.get("received"),
            "deserved_gpu_hours": figures.get("deserved"),
            "waiting_gpus": row.waiting_gpus,
            "starved_since": since.isoformat() if since else None,
            "url": team_url(slug),
        },
    }
    return subject, body, payload


def _announce(row: TeamFairness, kind: str, since: datetime | None, now: datetime) -> str:
    subject, body, payload = _notice(row, kind, since)
    sent, failures = send_notice(
        subject=subject, body=body, people=_recipients(row), payload=payload, prefix=f"{kind} "
    )
    result = reached(sent) or "nobody was reached (no address, no webhook)"
    if failures:
        result += "; failed: " + "; ".join(failures)
        log.warning("fair share of %s: %s notice: %s", row.team.slug, kind, "; ".join(failures))
    TeamFairness.objects.filter(pk=row.pk).update(
        last_notice=kind, last_notice_at=now, last_notice_result=result
    )
    return result


def evaluate_fair_shares(now: datetime | None = None) -> dict[str, int]:
    """Refresh every team's figures, open and close starvation episodes, and
    announce each opening and closing once. Returns the counts."""
    now = now or timezone.now()
    counts = {"teams": 0, "starved": 0, "began": 0, "cleared": 0}
    for row in refresh(now):
        counts["teams"] += 1
        starved = is_starved(row)
        counts["starved"] += int(starved)
        if starved:
            # Only the pass that finds no episode open opens it (and announces it).
            began = TeamFairness.objects.filter(pk=row.pk, starved_since__isnull=True).update(
                starved_since=now, episodes=F("episodes") + 1
            )
            if began:
                counts["began"] += 1
                _announce(row, STARVED, now, now)
            continue
        current = TeamFairness.objects.filter(pk=row.pk).values_list("starved_since", flat=True)[0]
        if current is not None:
            ended = TeamFairness.objects.filter(pk=row.pk, starved_since=current).update(
                starved_since=None
            )
            if ended:
                counts["cleared"] += 1
                _announce(row, CLEARED, current, now)
    return counts
