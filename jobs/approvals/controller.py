"""One pass of the approval controller, run periodically (Celery beat, or the
embedded loop): keep the AdmissionCheck Active, raise and re-approve requests,
withdraw and expire the stale ones, then write every decision the Workloads do
not show yet. Because the decision is in Postgres before it is written, a
worker that dies between the two loses nothing: the next pass writes it."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from jobs.approvals.apply import apply_decision, keep_check_active
from jobs.approvals.lifecycle import expire_requests, raise_requests, withdraw_requests
from jobs.approvals.notify import notify_approvers
from jobs.models import DECIDED_STATES, ApprovalRequest
from queues.backends.base import BackendError, ClusterBackend

log = logging.getLogger(__name__)


def undelivered() -> list[int]:
    """Decided requests whose decision is not on the Workload yet."""
    return list(
        ApprovalRequest.objects.filter(state__in=sorted(DECIDED_STATES), applied_at__isnull=True)
        .order_by("decided_at", "id")
        .values_list("pk", flat=True)
    )


def drive_approvals(backend: ClusterBackend, now: datetime | None = None) -> dict[str, int]:
    """Returns what the pass did, for the task result and the log."""
    now = now or timezone.now()
    activated = keep_check_active(backend, now)
    raised, reapproved = raise_requests(now)
    for request in raised:
        notify_approvers(request)
    withdrawn = withdraw_requests(now)
    expired = expire_requests(now)
    applied = failed = 0
    for request_id in undelivered():
        try:
            outcome = apply_decision(backend, request_id, now)
        except BackendError:
            failed += 1  # audited; the next pass tries again
            continue
        applied += outcome in ("applied", "already", "gone")
    return {
        "activated": int(activated),
        "raised": len(raised),
        "reapproved": len(reapproved),
        "withdrawn": withdrawn,
        "expired": len(expired),
        "applied": applied,
        "apply_failed": failed,
    }
