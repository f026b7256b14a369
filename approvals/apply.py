"""Writing decisions to the cluster, as a Kueue AdmissionCheck controller does:
server-side apply of Berth's own ``status.admissionChecks`` entry through the
Workload's status subresource (field manager ``berth``, conflicts forced on that
entry). Safe to repeat: a decision already visible is only marked applied."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from approvals.audit import record
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from approvals.notify import notify_unwritten
from approvals.status import (
    CHECK_NAME,
    active_condition,
    check_of,
    check_status_patch,
    is_active,
)
from cluster.sync import parse_time
from queues.backends.base import TYPES, BackendError, ClusterBackend

log = logging.getLogger(__name__)
WORKLOAD = TYPES["Workload"]
ADMISSION_CHECK = TYPES["AdmissionCheck"]


def reserved_at(workload: Mapping[str, Any]) -> datetime | None:
    """When the quota the Workload holds was reserved (None: it holds none)."""
    if not (workload.get("status") or {}).get("admission"):
        return None
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "QuotaReserved" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


def desired_check(request: ApprovalRequest) -> tuple[str, str]:
    """(state, message) the Workload's check should show for a decided request."""
    who = request.decided_by.get_username() if request.decided_by else "Berth"
    if request.state == ApprovalState.APPROVED:
        if request.reapproval_of_id:
            return "Ready", f"Re-approved by Berth: {request.comment}"
        text = f"Approved by {who} (approval #{request.pk})"
        return "Ready", f"{text}: {request.comment}" if request.comment else text
    if request.state == ApprovalState.EXPIRED:
        return "Rejected", (
            f"Rejected (expired): nobody decided approval #{request.pk} within "
            f"{request.window_minutes} minutes"
        )
    return "Rejected", f"Rejected by {who} (approval #{request.pk}): {request.comment}"


def _mark_applied(
    request: ApprovalRequest, now: datetime, message: str, *, written: bool = False
) -> bool:
    """Close the delivery: ``written`` when the Workload shows the decision (it
    took effect), not when there was nothing left to write it to."""
    # Together: a worker killed in between would leave a delivery closed with
    # no APPLIED event in its audit trail.
    with transaction.atomic():
        changed = ApprovalRequest.objects.filter(pk=request.pk, applied_at__isnull=True).update(
            applied_at=now, written=written
        )
        if changed:
            record(request, ApprovalAction.APPLIED, message=message, at=now)
    return bool(changed)


def _unwritten(request: ApprovalRequest, now: datetime, why: str, outcome: str) -> str:
    """Close the delivery with nothing written. A decision superseded (the
    reservation it answered ended first, while the workload lives on) is told
    to the person who made it, once: by the pass that closed it. One whose
    Workload is gone is moot, and nobody is told."""
    superseded = outcome == "superseded"
    if _mark_applied(request, now, f"superseded: {why}" if superseded else why) and superseded:
        notify_unwritten(request, why)
    return outcome


def apply_decision(backend: ClusterBackend, request_id: int, now: datetime | None = None) -> str:
    """Write request ``request_id``'s decision to its Workload. Returns what
    happened: ``applied``, ``already`` (the Workload shows it), ``gone`` (the
    Workload left, is another one now, or no longer carries the check),
    ``superseded`` (the reservation it answered ended), ``undecided`` or ``done``. Transient
    cluster errors are raised for the caller to retry; they are audited once."""
    now = now or timezone.now()
    request = ApprovalRequest.objects.select_related("decided_by").get(pk=request_id)
    if request.applied_at is not None:
        return "done"
    if not request.is_decided:
        return "undecided"
    state, message = desired_check(request)
    try:
        workload = backend.get(WORKLOAD, request.workload_name, request.namespace)
        if workload is None or workload["metadata"].get("uid") != request.workload_uid:
            return _unwritten(request, now, "the Workload is gone; nothing to write", "gone")
        held = reserved_at(workload)
        if held is None or held != request.reserved_at:
            # The reservation it answered ended before the write (an eviction):
            # Kueue asks again with the next one, and so does Berth.
            return _unwritten(
                request,
                now,
                "the workload lost the quota this decision was for before it was written",
                "superseded",
            )
        entry = check_of(workload)
        if entry is None:
            # Kueue no longer asks (say, it moved to a queue without the check):
            # adding an entry nobody waits for would only litter its status.
            return _unwritten(request, now, f"the Workload no longer carries {CHECK_NAME}", "gone")
        if entry.get("state") == state:
            _mark_applied(
                request, now, f"the Workload already shows {CHECK_NAME} {state}", written=True
            )
            return "already"
        # Precondition on the version read: were the Workload evicted meanwhile,
        # the write is refused (409) instead of landing on the next reservation.
        backend.patch_status(
            WORKLOAD,
            request.workload_name,
            request.namespace,
            check_status_patch(state, message, now),
            resource_version=str(workload["metadata"].get("resourceVersion") or "") or None,
        )
    except BackendError as exc:
        # The task and the periodic pass may fail at once: count in SQL, and
        # audit only the first failure (the row that moved from zero).
        first = ApprovalRequest.objects.filter(pk=request.pk, apply_attempts=0).update(
            apply_attempts=1
        )
        if first:
            record(request, ApprovalAction.APPLY_FAILED, message=str(exc), at=now)
        else:
            ApprovalRequest.objects.filter(pk=request.pk).update(
                apply_attempts=F("apply_attempts") + 1
            )
        log.warning("approval #%s: writing %s to the Workload failed: %s", request.pk, state, exc)
        raise
    _mark_applied(request, now, f"{CHECK_NAME} set to {state}: {message}", written=True)
    return "applied"


def keep_check_active(backend: ClusterBackend, now: datetime | None = None) -> bool:
    """Set the AdmissionCheck's Active condition True when it is not (Kueue
    treats a check nobody answers as inactive and stops the queues using it).
    Returns whether it wrote. No AdmissionCheck (no gated queue): nothing to do."""
    check = backend.get(ADMISSION_CHECK, CHECK_NAME)
    if check is None or is_active(check):
        return False
    generation = int((check.get("metadata") or {}).get("generation") or 1)
    condition = active_condition(generation, now or timezone.now())
    for current in (check.get("status") or {}).get("conditions") or []:
        if current.get("type") == "Active" and current.get("status") == "True":
            # Still True, only for a newer generation: no transition happened.
            condition["lastTransitionTime"] = current.get(
                "lastTransitionTime", condition["lastTransitionTime"]
            )
    backend.patch_status(ADMISSION_CHECK, CHECK_NAME, None, {"conditions": [condition]})
    return True
