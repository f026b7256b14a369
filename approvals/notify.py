"""Telling approvers a request waits: the inbox is the approvals page itself;
e-mail goes through Django's mail settings (the console backend by default);
a Slack-compatible webhook gets a JSON payload when BERTH_APPROVAL_WEBHOOK_URL
is set. A failed notification is audited and never stops the request.

The audit claims only who was reached: approvers with an e-mail address the
mail went to, and the webhook (named by its host: the path of a Slack webhook
URL is its secret). Approvers without an address are named as not reached.
When a request is withdrawn, the requester and everyone the request reached
are told, on the same channels. When a person's decision is closed without
reaching the Workload (the reservation it answered ended first), that person
is told, and what happens next."""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail

from approvals.access import approvers_for
from approvals.audit import record
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState

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
        cost = (
            "not running (waiting for admission checks): loses its quota reservation"
            if victim.get("state") == "reserved"
            else f"{victim['gpu_hours_lost']} GPU-hours lost"
        )
        lines.append(
            f"  - {victim['workload']} ({victim['team'] or 'no team'}, priority "
            f"{victim['priority']}, {victim['gpus']} GPUs): {cost}"
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
            "state": request.state,
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


def webhook_channel(url: str) -> str:
    """The webhook as the audit names it: by its host only."""
    return f"webhook {urlsplit(url).hostname or 'unknown host'}"


def _names(names: list[str]) -> str:
    return ", ".join(names)


def _reached(sent: dict[str, Any]) -> str:
    """ "told carol, erin by e-mail; webhook hooks.slack.com (HTTP 200)", or ""."""
    parts = []
    if sent.get("emailed"):
        parts.append(f"told {_names(sent['emailed'])} by e-mail")
    if "webhook" in sent:
        parts.append(f"{sent['channel']} (HTTP {sent['webhook']})")
    return "; ".join(parts)


def _unreached(names: list[str]) -> str:
    verb = "has" if len(names) == 1 else "have"
    return f"{_names(names)} {verb} no e-mail address"


def _deliver(
    sent: dict[str, Any],
    *,
    subject: str,
    body: str,
    people: Mapping[str, str],
    payload: Callable[[], dict[str, Any]] | None,
    prefix: str = "",
) -> list[str]:
    """Mail ``people`` (username → address) and post ``payload()`` to the
    approval webhook when there is one; records in ``sent`` what reached whom
    and returns what failed (audited by the caller, never fatal)."""
    failures = []
    addresses = sorted(set(people.values()))
    if addresses:
        try:
            send_mail(f"[Berth] {subject}", body, settings.DEFAULT_FROM_EMAIL, addresses)
            sent["email"] = addresses
            sent["emailed"] = list(people)
        except Exception as exc:  # any mail backend error: audited, never fatal
            failures.append(f"{prefix}e-mail: {exc}")
    url = settings.BERTH_APPROVAL_WEBHOOK_URL
    if payload is not None and url:
        sent["channel"] = webhook_channel(url)
        try:
            sent["webhook"] = _post(url, payload())
        except Exception as exc:  # unreachable, timeout, HTTP error: audited
            failures.append(f"{prefix}webhook: {exc}")
    return failures


def notify_approvers(request: ApprovalRequest) -> dict[str, Any]:
    """Mail the request's approvers and call the webhook; returns what was sent:
    ``approvers`` (who may decide it), ``emailed`` and ``email`` (whom the mail
    reached, and their addresses), ``unreached`` (approvers without an
    address), ``webhook`` (its HTTP status, when it answered) and ``channel``.
    The audit's ``notified`` names only the people and the channel reached;
    when nobody was reached, it records a failed notification instead."""
    approvers = approvers_for(request)
    sent: dict[str, Any] = {
        "approvers": [u.get_username() for u in approvers],
        "email": [],
        "emailed": [],
        "unreached": [u.get_username() for u in approvers if not u.email],
    }
    failures = _deliver(
        sent,
        subject=headline(request),
        body=_body(request),
        people={u.get_username(): u.email for u in approvers if u.email},
        payload=lambda: webhook_payload(request),
    )
    reached = _reached(sent)
    if reached:
        message = reached
        if sent["unreached"]:
            message += f"; not reached: {_names(sent['unreached'])} (no e-mail address)"
        record(request, ApprovalAction.NOTIFIED, message=message, details=sent)
    elif not failures:
        why = _unreached(sent["unreached"]) if sent["unreached"] else "no approver was found"
        failures.append(
            f"nobody was reached: {why} and no webhook is set (BERTH_APPROVAL_WEBHOOK_URL); "
            "the request waits in the approvals inbox"
        )
    elif sent["unreached"]:
        failures.append(f"not reached: {_names(sent['unreached'])} (no e-mail address)")
    if failures:
        log.warning("approval #%s: notifying failed: %s", request.pk, "; ".join(failures))
        record(request, ApprovalAction.NOTIFY_FAILED, message="; ".join(failures), details=sent)
    return sent


# ------------------------------------------------------------------ withdrawn


def _told_of(request: ApprovalRequest) -> tuple[list[tuple[str, str]], bool]:
    """Whom the request reached: (name, address) of each e-mail recipient, and
    whether the webhook channel was told (from the audit of its notification)."""
    people: dict[str, str] = {}
    webhook = False
    for details in request.events.filter(action=ApprovalAction.NOTIFIED).values_list(
        "details", flat=True
    ):
        if not isinstance(details, dict) or details.get("about"):
            continue
        addresses = [str(a) for a in details.get("email") or []]
        names = [str(n) for n in details.get("emailed") or []]
        if len(names) != len(addresses):  # audited before names were kept
            names = [a.split("@", 1)[0] for a in addresses]
        people.update(zip(addresses, names, strict=True))
        webhook = webhook or "webhook" in details
    return sorted((name, address) for address, name in people.items()), webhook


def _withdrawn_body(request: ApprovalRequest) -> str:
    return "\n".join(
        [
            f"Approval #{request.pk} for {request.workload_key} "
            f"({request.gpus} GPUs in ClusterQueue {request.cluster_queue}) was withdrawn "
            "before anyone decided:",
            request.comment or "its workload no longer holds the reservation it asked about",
            "",
            "Nothing needs deciding. If the workload reserves quota again, Berth asks "
            "anew, with a fresh impact preview.",
            request_url(request),
        ]
    )


def _withdrawn_payload(request: ApprovalRequest) -> dict[str, Any]:
    text = (
        f"Approval #{request.pk} for {request.workload_key} was withdrawn: "
        f"{request.comment or 'its reservation ended'}"
    )
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"<{request_url(request)}|In Berth>"}],
            },
        ],
        "berth": {
            "approval_id": request.pk,
            "state": request.state,
            "workload": request.workload_key,
            "cluster_queue": request.cluster_queue,
            "reason": request.comment,
            "url": request_url(request),
        },
    }


def notify_withdrawn(request: ApprovalRequest) -> dict[str, Any]:
    """Tell the requester and everyone the request reached that it was
    withdrawn, and why (``request.comment``): e-mail to the requester and to
    the addresses the request went to, and the webhook when the request was
    posted there. Audited like a request's notification (``details.about`` is
    ``withdrawn``); a failure is audited and never fatal."""
    told, webhook = _told_of(request)
    people = dict(told)
    requester = request.requester
    unreached = []
    if requester is not None:
        if requester.email:
            people.setdefault(requester.get_username(), requester.email)
        else:
            unreached.append(requester.get_username())
    sent: dict[str, Any] = {"about": "withdrawn", "email": [], "emailed": []}
    failures = _deliver(
        sent,
        subject=f"Approval #{request.pk} withdrawn: {request.workload_key}",
        body=_withdrawn_body(request),
        people=dict(sorted(people.items())),
        payload=(lambda: _withdrawn_payload(request)) if webhook else None,
        prefix="withdrawal ",
    )
    reached = _reached(sent)
    if reached:
        message = f"withdrawal: {reached}"
        if unreached:
            message += f"; not reached: {_names(unreached)} (no e-mail address)"
        record(request, ApprovalAction.NOTIFIED, message=message, details=sent)
    elif not failures:
        who = f"{_unreached(unreached)}; " if unreached else ""
        failures.append(f"nobody was told of the withdrawal: {who}nobody else had been told")
    if failures:
        log.warning("approval #%s: %s", request.pk, "; ".join(failures))
        record(request, ApprovalAction.NOTIFY_FAILED, message="; ".join(failures), details=sent)
    return sent


# ------------------------------------------------------------------ unwritten


def _unwritten_next(request: ApprovalRequest) -> str:
    """What becomes of a superseded decision, for the person who made it."""
    if request.state != ApprovalState.APPROVED:
        return (
            "Your rejection stands for the workload's next reservation: if Kueue reserves "
            "quota for it again, Berth rejects that one with your reason."
        )
    minutes = settings.BERTH_APPROVAL_GRACE // 60
    if minutes:
        return (
            f"If Kueue reserves quota for it again within {minutes} minutes of losing it, "
            "your approval stands (Berth re-approves it); after that, Berth asks the "
            "approvers again."
        )
    return "When Kueue reserves quota for it again, Berth asks the approvers again."


def notify_unwritten(request: ApprovalRequest, why: str) -> dict[str, Any]:
    """Tell the person who decided ``request`` that their decision was closed
    without reaching the Workload, because the reservation it answered ended
    first (``why``), and what happens next: e-mail to them, and the webhook
    when the request was posted there.
    Audited like the request's notification (``details.about`` is
    ``unwritten``); a failure is audited and never fatal. Nothing is sent for
    a decision nobody made (an expiry)."""
    decider = request.decided_by
    if decider is None:
        return {}
    verb = "approval" if request.state == ApprovalState.APPROVED else "rejection"
    _, webhook = _told_of(request)
    text = (
        f"Your {verb} of approval #{request.pk} ({request.workload_key}, {request.gpus} GPUs "
        f"in ClusterQueue {request.cluster_queue}) was not written to the Workload: {why}."
    )
    then = _unwritten_next(request)
    sent: dict[str, Any] = {"about": "unwritten", "email": [], "emailed": []}
    people = {decider.get_username(): decider.email} if decider.email else {}
    failures = _deliver(
        sent,
        subject=f"Approval #{request.pk}: your {verb} was not written ({request.workload_key})",
        body="\n".join([text, "", then, request_url(request)]),
        people=people,
        payload=(
            (
                lambda: {
                    "text": f"{text} {then}",
                    "berth": {
                        "approval_id": request.pk,
                        "state": request.state,
                        "workload": request.workload_key,
                        "written": False,
                        "reason": why,
                        "url": request_url(request),
                    },
                }
            )
            if webhook
            else None
        ),
        prefix="unwritten-decision ",
    )
    reached = _reached(sent)
    if reached:
        record(request, ApprovalAction.NOTIFIED, message=f"not written: {reached}", details=sent)
    elif not failures:
        failures.append(
            f"nobody was told the decision was not written: {_unreached([decider.get_username()])}"
        )
    if failures:
        log.warning("approval #%s: %s", request.pk, "; ".join(failures))
        record(request, ApprovalAction.NOTIFY_FAILED, message="; ".join(failures), details=sent)
    return sent


# ------------------------------------------------------------------ other notices


def send_notice(
    *,
    subject: str,
    body: str,
    people: Mapping[str, str],
    payload: dict[str, Any],
    prefix: str = "",
) -> tuple[dict[str, Any], list[str]]:
    """Send a notice that is not about one approval request (a team starving
    of its fair share, ``approvals.fairness_alerts``) on the approvals'
    channels: e-mail to ``people`` (username → address) and the approval
    webhook when one is set. Returns what was sent (as ``notify_approvers``
    does) and what failed; the caller records both, and nothing here raises."""
    sent: dict[str, Any] = {"email": [], "emailed": []}
    failures = _deliver(
        sent, subject=subject, body=body, people=people, payload=lambda: payload, prefix=prefix
    )
    return sent, failures


def reached(sent: dict[str, Any]) -> str:
    """What ``send_notice`` reached, in words ("" when nobody)."""
    return _reached(sent)
