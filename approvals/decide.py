"""Deciding a request: once, by an approver, compare-and-set.

Two approvers pressing at the same moment both reach the ``UPDATE ... WHERE
state = 'pending'``; one row changes, and the other is told who decided. The
decision is committed before anything touches the cluster; writing it to the
Workload is the apply task's job (and the controller's re-drive, if that task
is lost, or could not be queued at all: the decision is then answered as
stored, with what is pending).

A decision for a reservation that has already ended (sync saw the workload
evicted, finished or deleted before anyone decided) can no longer be written.
An approval is refused (``reservation-ended``), as is a rejection of a workload
that will not reserve quota again; a rejection of one that may is stored and
stands for its next reservation (``approvals.lifecycle``), and the answer says
so."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from approvals.access import check_may_decide
from approvals.audit import record
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from approvals.reservation import MAY_RESERVE_AGAIN, holds, why_withdrawn, workload_of
from cluster.models import WorkloadRecord, WorkloadState
from queues.deferred import after_commit
from queues.errors import PolicyConflict, PolicyInvalid

log = logging.getLogger(__name__)
MAX_COMMENT = 4000
# Written to the Workload by this task after the commit; if it cannot be
# queued, the controller's periodic pass writes the decision.
APPLY_APPROVAL = "jobs.tasks.apply_approval"


class AlreadyDecided(PolicyConflict):
    """Someone else decided first (or the request expired or was withdrawn)."""


class ReservationEnded(AlreadyDecided):
    """Too late to decide: the quota reservation the request asked about has
    ended, and the decision could not stand for a next one. Nothing is stored;
    the controller withdraws the request (telling whom it reached) and asks
    again if Kueue reserves quota for the workload again."""


RESERVATION_ENDED = "reservation-ended"


@dataclass
class Decision:
    """A decision as stored, and what is still pending about it: "" when its
    write to the Workload is under way, else in words (it stands for the
    workload's next reservation; its write could not be queued and the
    controller's next pass does it)."""

    request: ApprovalRequest
    pending: str = ""


def _who(request: ApprovalRequest) -> str:
    if request.decided_by is not None:
        return request.decided_by.get_username()
    return "Berth" if request.state != ApprovalState.WITHDRAWN else "nobody"


def already_decided(request: ApprovalRequest) -> AlreadyDecided:
    when = (
        request.decided_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if request.decided_at
        else ""
    )
    message = f"approval #{request.pk} is already {request.state}"
    if request.state in (ApprovalState.APPROVED, ApprovalState.REJECTED):
        message += f" by {_who(request)}"
    if when:
        message += f" at {when}"
    if request.comment and request.state != ApprovalState.EXPIRED:
        message += f": {request.comment}"
    return AlreadyDecided(
        message,
        "already-decided",
        {"state": [request.state], "decided_by": [_who(request)] if request.decided_by else []},
    )


def decide(
    user: Any, request_id: int, *, approve: bool, comment: str = "", key: str = ""
) -> ApprovalRequest:
    """Approve or reject request ``request_id`` as ``user``; the request as
    decided (``submit_decision`` also says what is pending)."""
    return submit_decision(user, request_id, approve=approve, comment=comment, key=key).request


def submit_decision(
    user: Any, request_id: int, *, approve: bool, comment: str = "", key: str = ""
) -> Decision:
    """Approve or reject request ``request_id`` as ``user``.

    Raises NotAllowed (the requester, or not an approver for the queue),
    PolicyInvalid (a rejection without a reason, a comment too long),
    AlreadyDecided, or ReservationEnded (the reservation it answered is over
    and the decision cannot stand for a next one); none of them changes
    anything. With ``key`` (the client's Idempotency-Key), the same decision
    sent again by the same user returns the request as decided instead of
    AlreadyDecided."""
    field = "comment" if approve else "reason"
    text = (comment or "").strip()
    request = ApprovalRequest.objects.select_related("decided_by").get(pk=request_id)
    check_may_decide(user, request)
    now = timezone.now()
    if request.state == ApprovalState.PENDING and request.expires_at <= now:
        # Past its deadline, even if no controller pass has expired it yet.
        expire(request, now)
        request.refresh_from_db()
    if _replayed(request, user, approve=approve, key=key):
        return Decision(request)
    if request.state != ApprovalState.PENDING:
        raise already_decided(request)  # before the input: a reason would not help
    workload = workload_of(request)
    ended = "" if holds(request, workload) else _why_ended(request, workload)
    if ended and (approve or workload is None or workload.state not in MAY_RESERVE_AGAIN):
        raise reservation_ended(request, workload, ended, approve=approve)
    if not approve and not text:
        raise PolicyInvalid.single(
            "reason", "required", "a reason is required to reject: say why it may not run"
        )
    if len(text) > MAX_COMMENT:
        raise PolicyInvalid.single(
            field, "max-length", f"at most {MAX_COMMENT} characters (got {len(text)})"
        )
    unqueued: list[str] = []
    carried = (
        f"the quota reservation it answered has ended ({ended}), so it cannot be written "
        "to it; it stands for the workload's next reservation, which Berth rejects with "
        "this reason"
        if ended
        else ""
    )
    if write_decision(
        request,
        user,
        approve=approve,
        text=text,
        now=now,
        key=key,
        superseded=carried,
        on_unqueued=lambda: unqueued.append(not_queued_text()),
    ):
        pending = f"The rejection is stored, but {carried}." if carried else ""
        return Decision(request, pending or "".join(unqueued))
    current = ApprovalRequest.objects.select_related("decided_by").get(pk=request.pk)
    if _replayed(current, user, approve=approve, key=key):  # the same POST, just before
        return Decision(current)
    if current.state == ApprovalState.PENDING:  # still pending: it was the deadline
        expire(current, max(timezone.now(), current.expires_at))
        current.refresh_from_db()
    raise already_decided(current)


def _replayed(request: ApprovalRequest, user: Any, *, approve: bool, key: str) -> bool:
    """Whether this decision is one already written: same key, user and verdict."""
    verdict = ApprovalState.APPROVED if approve else ApprovalState.REJECTED
    return bool(key) and (
        request.decision_key == key
        and request.state == verdict
        and request.decided_by_id == getattr(user, "pk", None)
    )


def write_decision(
    request: ApprovalRequest,
    user: Any,
    *,
    approve: bool,
    text: str,
    now: datetime,
    key: str = "",
    superseded: str = "",
    on_unqueued: Callable[[], None] | None = None,
) -> bool:
    """Write the decision if the request is still pending and before its
    deadline by the database's clock, whatever ``now`` (the app's clock) says:
    the clocks of web pods drift, and a decision that waited on the row lock
    past the deadline loses. Returns whether it was written.

    ``superseded`` (why): the reservation it answers has ended, so there is
    nothing to write it to; it is closed unwritten at once, as the apply task
    would. Otherwise its write is queued after the commit; if that fails (the
    broker is down), the failure is audited, ``on_unqueued`` is called, and the
    controller's next pass writes it (``approvals.controller.undelivered``)."""
    state = ApprovalState.APPROVED if approve else ApprovalState.REJECTED
    with transaction.atomic():
        changed = ApprovalRequest.objects.filter(
            pk=request.pk, state=ApprovalState.PENDING, expires_at__gt=Now()
        ).update(state=state, decided_by=user, decided_at=now, comment=text, decision_key=key)
        if changed:
            request.refresh_from_db()
            record(
                request,
                ApprovalAction.APPROVED if approve else ApprovalAction.REJECTED,
                actor=user,
                message=text,
                at=now,
            )
            if superseded:
                ApprovalRequest.objects.filter(pk=request.pk).update(applied_at=now, written=False)
                request.applied_at, request.written = now, False
                record(request, ApprovalAction.APPLIED, message=f"superseded: {superseded}", at=now)
            else:
                after_commit(
                    APPLY_APPROVAL,
                    request.pk,
                    stored=f"approval #{request.pk}: decided",
                    on_failure=lambda: _not_queued(request, on_unqueued),
                )
    return bool(changed)


def not_queued_text() -> str:
    return (
        "The decision is stored, but writing it to the Workload could not be queued "
        "(Berth's task queue did not take it); the approval controller writes it on its "
        f"next pass (every {settings.BERTH_APPROVAL_INTERVAL} s)."
    )


def _not_queued(request: ApprovalRequest, then: Callable[[], None] | None) -> None:
    """The decision is stored but its write was not queued: audited (the
    request's trail says why it is not on the Workload yet); the controller's
    pass writes every decided request not yet applied."""
    record(
        request,
        ApprovalAction.APPLY_FAILED,
        message="writing it to the Workload could not be queued (the task queue did not "
        "take it); the approval controller's next pass writes it",
        details={"queued": False},
    )
    if then is not None:
        then()


def _why_ended(request: ApprovalRequest, workload: WorkloadRecord | None) -> str:
    if workload is not None and workload.state == WorkloadState.QUOTA_RESERVED:
        return "Kueue evicted the workload and has reserved quota for it again since"
    return why_withdrawn(request, workload, None)


def reservation_ended(
    request: ApprovalRequest, workload: WorkloadRecord | None, why: str, *, approve: bool
) -> ReservationEnded:
    verb = "approved" if approve else "rejected"
    state = workload.state if workload is not None else None
    if state == WorkloadState.QUOTA_RESERVED:
        after = "Berth asks about its new reservation, with a fresh impact preview"
    elif state in MAY_RESERVE_AGAIN:
        after = "Berth asks again, with a fresh impact preview, when Kueue reserves quota for it"
    else:
        after = "there is nothing left to decide"
    return ReservationEnded(
        f"approval #{request.pk} can no longer be {verb}: the quota reservation it asked "
        f"about has ended ({why}); {after}",
        RESERVATION_ENDED,
        {"workload_state": [workload.state] if workload is not None else []},
    )


def expire(request: ApprovalRequest, now: datetime) -> bool:
    """Pending past its deadline → ``expired`` (a rejection), compare-and-set;
    the decision is then written like any other. Returns whether it changed."""
    with transaction.atomic():
        changed = ApprovalRequest.objects.filter(
            pk=request.pk, state=ApprovalState.PENDING, expires_at__lte=now
        ).update(state=ApprovalState.EXPIRED, decided_at=now, comment="expired")
        if changed:
            record(
                request,
                ApprovalAction.EXPIRED,
                message=f"expired: nobody decided within {request.window_minutes} minutes",
                at=now,
            )
            after_commit(APPLY_APPROVAL, request.pk, stored=f"approval #{request.pk}: decided")
    return bool(changed)
