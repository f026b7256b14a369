"""Telling approvers a request waits: the inbox is the approvals page itself;
e-mail goes through Django's mail settings (the console backend by default);
a Slack-compatible webhook gets a JSON payload when BERTH_APPROVAL_WEBHOOK_URL
is set. A failed notification is audited and never stops the request."""

from __future__ import annotations

import json
import logging
import urllib.request
from datetime import UTC
from typing import Any

from django.conf import settings
from django.core.mail import send_mail

from jobs.approvals.access import approvers_for
from jobs.approvals.audit import record
from jobs.models import ApprovalAction, ApprovalRequest

log = logging.getLogger(__name__)
WEBHOOK_TIMEOUT = 5.0


def request_url(request: ApprovalRequest) -> str:
    return f"{settings.BERTH_PUBLIC_URL}/approvals/{request.pk}/"


def headline(request: ApprovalRequest) -> str:
    who = request.requester.get_username() if request.requester else "someone"
    team = request.team.slug if request.team else request.namespace
    return (
        f"Approval #{request.pk}: {who} ({team}) asks to run {request.workload_key} "
        f"on {request.gpus} GPUs in ClusterQueue {request.cluster_queue}"
    )


def _body(request: ApprovalRequest) -> str:
    impact = request.impact or {}
    lines = [
        headline(request),
        "",
        f"Justification: {request.justification or '(none given)'}",
        f"Impact: {impact.get('summary', 'not computed')}",
    ]
    for victim in impact.get("preempts", [])[:20]:
        lines.append(
            f"  - {victim['workload']} ({victim['team'] or 'no team'}, priority "
            f"{victim['priority']}, {victim['gpus']} GPUs): {victim['gpu_hours_lost']} "
            "GPU-hours lost"
        )
    lines += [
        "",
        f"Decide by {request.expires_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC, or it is "
        "rejected as expired:",
        request_url(request),
        f"or: berth approvals approve {request.pk}  |  "
        f"berth approvals reject {request.pk} --reason '...'",
    ]
    return "\n".join(lines)


def webhook_payload(request: ApprovalRequest) -> dict[str, Any]:
    """Slack's incoming-webhook shape (``text`` plus blocks); other chat tools
    that accept Slack payloads read ``text``."""
    impact = request.impact or {}
    text = f"{headline(request)}. {impact.get('summary', '')}".strip()
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline(request)}*"}},
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*Justification:* {request.justification or '(none)'}\n"
                    f"*Impact:* {impact.get('summary', 'not computed')}",
                },
            },
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"<{request_url(request)}|Decide in Berth>"}
                ],
            },
        ],
        "berth": {
            "approval_id": request.pk,
            "workload": request.workload_key,
            "cluster_queue": request.cluster_queue,
            "team": request.team.slug if request.team else None,
            "requester": request.requester.get_username() if request.requester else None,
            "gpus": request.gpus,
            "gpu_hours_lost": impact.get("gpu_hours_lost", 0),
            "expires_at": request.expires_at.isoformat(),
            "url": request_url(request),
        },
    }


def _post(url: str, payload: dict[str, Any]) -> int:
    data = json.dumps(payload).encode()
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=WEBHOOK_TIMEOUT) as response:
        return int(response.status)


def notify_approvers(request: ApprovalRequest) -> dict[str, Any]:
    """Mail the request's approvers and call the webhook; returns what was sent."""
    approvers = approvers_for(request)
    addresses = sorted({u.email for u in approvers if u.email})
    sent: dict[str, Any] = {"approvers": [u.get_username() for u in approvers], "email": []}
    failures = []
    if addresses:
        try:
            send_mail(
                f"[Berth] {headline(request)}",
                _body(request),
                settings.DEFAULT_FROM_EMAIL,
                addresses,
            )
            sent["email"] = addresses
        except Exception as exc:  # any mail backend error: audited, never fatal
            failures.append(f"e-mail: {exc}")
    if settings.BERTH_APPROVAL_WEBHOOK_URL:
        try:
            sent["webhook"] = _post(settings.BERTH_APPROVAL_WEBHOOK_URL, webhook_payload(request))
        except Exception as exc:  # unreachable, timeout, HTTP error: audited
            failures.append(f"webhook: {exc}")
    record(request, ApprovalAction.NOTIFIED, message=", ".join(sent["approvers"]), details=sent)
    if failures:
        log.warning("approval #%s: notifying failed: %s", request.pk, "; ".join(failures))
        record(request, ApprovalAction.NOTIFY_FAILED, message="; ".join(failures))
    return sent
