"""Deciding a request: once, by an approver, compare-and-set.

Two approvers pressing at the same moment both reach the ``UPDATE ... WHERE
state = 'pending'``; one row changes, and the other is told who decided. The
decision is committed before anything touches the cluster; writing it to the
Workload is the apply task's job (and the controller's re-drive, if that task
is lost)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from approvals.access import check_may_decide
from approvals.audit import record
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from queues.deferred import after_commit
from queues.errors import PolicyConflict, PolicyInvalid

log = logging.getLogger(__name__)
MAX_COMMENT = 4000
# Written to the Workload by this task after the commit; if it cannot be
# queued, the controller's periodic pass writes the decision.
APPLY_APPROVAL = "jobs.tasks.apply_approval"


class AlreadyDecided(PolicyConflict):
    """Someone else decided first (or the request expired or was withdrawn)."""


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
    """Approve or reject request ``request_id`` as ``user``.

    Raises NotAllowed (the requester, or not an approver for the queue),
    PolicyInvalid (a rejection without a reason, a comment too long) or
    AlreadyDecided; none of them changes anything. With ``key`` (the client's
    Idempotency-Key), the same decision sent again by the same user returns
    the request as decided instead of AlreadyDecided."""
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
        return request
    if request.state != ApprovalState.PENDING:
        raise already_decided(request)  # before the input: a reason would not help
    if not approve and not text:
        raise PolicyInvalid.single(
            "reason", "required", "a reason is required to reject: say why it may not run"
        )
    if len(text) > MAX_COMMENT:
        raise PolicyInvalid.single(
            field, "max-length", f"at most {MAX_COMMENT} characters (got {len(text)})"
        )
    if write_decision(request, user, approve=approve, text=text, now=now, key=key):
        return request
    current = ApprovalRequest.objects.select_related("decided_by").get(pk=request.pk)
    if _replayed(current, user, approve=approve, key=key):  # the same POST, just before
        return current
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
) -> bool:
    """Write the decision if the request is still pending and before its
    deadline by the database's clock, whatever ``now`` (the app's clock) says:
    the clocks of web pods drift, and a decision that waited on the row lock
    past the deadline loses. Returns whether it was written."""
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
            after_commit(APPLY_APPROVAL, request.pk, stored=f"approval #{request.pk}: decided")
    return bool(changed)


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
