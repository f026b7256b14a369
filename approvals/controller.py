"""One pass of the approval controller, run periodically (Celery beat, or the
embedded loop): keep the AdmissionCheck Active, withdraw requests whose
reservation ended, raise and re-approve, expire the overdue ones, tell the
approvers, then write every decision the Workloads do not show yet. Because the
decision is in Postgres before it is written, a worker that dies between the
two loses nothing: the next pass writes it. The same holds for telling the
approvers of a request a crashed pass had just raised (at least once)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from approvals.apply import apply_decision, keep_check_active
from approvals.lifecycle import expire_requests, raise_requests, withdraw_requests
from approvals.models import DECIDED_STATES, ApprovalRequest, ApprovalState
from approvals.notify import notify_approvers
from queues.backends.base import BackendError, ClusterBackend
from queues.locks import try_lock

log = logging.getLogger(__name__)


def undelivered() -> list[int]:
    """Decided requests whose decision is not on the Workload yet."""
    return list(
        ApprovalRequest.objects.filter(state__in=sorted(DECIDED_STATES), applied_at__isnull=True)
        .order_by("decided_at", "id")
        .values_list("pk", flat=True)
    )


PASS_LOCK = "berth.approval-pass"


def notify_pending(now: datetime) -> tuple[int, int]:
    """Tell the approvers of every pending request nobody has told yet (new
    ones, and any a crashed pass left), before its deadline. Marked told after
    sending, so a crash in between sends it again next pass: at least once,
    never zero times. (Passes do not overlap, so two never send at once.) A
    lookup or audit error leaves it for the next pass; a mail or webhook
    failure is audited by ``notify_approvers`` and not retried. Returns
    (notified, failed)."""
    notified = failed = 0
    waiting = ApprovalRequest.objects.filter(
        state=ApprovalState.PENDING, notified_at__isnull=True, expires_at__gt=now
    ).order_by("created_at", "id")
    for request in waiting.select_related("requester", "team"):
        try:
            with transaction.atomic():
                notify_approvers(request)
                ApprovalRequest.objects.filter(pk=request.pk).update(notified_at=now)
            notified += 1
        except Exception:  # a broken lookup or audit write: try again next pass
            log.exception("approval #%s: notifying the approvers failed", request.pk)
            failed += 1
    return notified, failed


def drive_approvals(backend: ClusterBackend, now: datetime | None = None) -> dict[str, int]:
    """Returns what the pass did, for the task result and the log. Passes do
    not overlap (an advisory lock): one that finds another running skips."""
    with try_lock(PASS_LOCK) as taken:
        if not taken:
            return {"skipped": 1}
        return _pass(backend, now or timezone.now())


def _pass(backend: ClusterBackend, now: datetime) -> dict[str, int]:
    activated = keep_check_active(backend, now)
    # Withdrawn first: a workload evicted and back is asked again in this pass.
    withdrawn = withdraw_requests(now)
    raised, reapproved = raise_requests(now)
    expired = expire_requests(now)  # before telling anyone: no mail for an overdue one
    notified, notify_failed = notify_pending(now)
    applied = failed = 0
    for request_id in undelivered():
        try:
            outcome = apply_decision(backend, request_id, now)
        except BackendError:
            failed += 1  # audited; the next pass tries again
            continue
        applied += outcome in ("applied", "already", "gone", "superseded")
    return {
        "activated": int(activated),
        "raised": len(raised),
        "notified": notified,
        "notify_failed": notify_failed,
        "reapproved": len(reapproved),
        "withdrawn": withdrawn,
        "expired": len(expired),
        "applied": applied,
        "apply_failed": failed,
    }
