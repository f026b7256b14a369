"""Deciding, applying, ending and reverting grants.

Approving applies the grant inside the same transaction that marks it
active, under the policy write lock: either both commit or neither does (a
change the policy services refuse leaves the grant pending, with the refusal
as the answer). Ending reverts the deltas it applied, newest first; a delta
that can no longer be taken back (the queue or its quota entry was deleted
meanwhile, an admin removed the limit) is left alone and the grant says why.
``revert_ended`` is the beat sweep: every active grant whose end has passed,
however long ago (Berth may have been down at that moment), is ended.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime
from typing import Any

from django.db.models.functions import Now
from django.utils import timezone

from grants.access import check_may_decide, check_may_end
from grants.impact import grant_impact
from grants.models import GrantKind, GrantState, QuotaGrant
from grants.policy import BORROWING, LENDING, NOMINAL, Delta, current, shift
from grants.services import MAX_TEXT, AlreadyDecided, already, describe, when
from queues.deferred import after_commit
from queues.errors import PolicyInvalid
from queues.models import ClusterQueue
from queues.quantity import format_canonical
from queues.services.common import noted, policy_write

log = logging.getLogger(__name__)
NOTIFY_OUTCOME = "grants.tasks.notify_grant_outcome"


def _tell_requester(grant_id: int, what: str) -> None:
    """Queue the requester's notice once the change commits."""
    after_commit(NOTIFY_OUTCOME, grant_id, stored=f"quota grant #{grant_id}: {what}")


def _replayed(grant: QuotaGrant, user: Any, state: GrantState, key: str) -> bool:
    """The same decision sent again (same key, user and verdict): answered as the first."""
    return bool(key) and (
        grant.decision_key == key
        and grant.state == state
        and grant.decided_by_id == getattr(user, "pk", None)
    )


def _text(field: str, value: str) -> str:
    text = (value or "").strip()
    if len(text) > MAX_TEXT:
        raise PolicyInvalid.single(field, "max-length", f"at most {MAX_TEXT} characters")
    return text


def _queue(name: str, field: str) -> ClusterQueue:
    queue = ClusterQueue.objects.select_related("team").filter(name=name).first()
    if queue is None:
        raise PolicyInvalid.single(
            field, "unknown-reference", f"cluster queue {name!r} no longer exists"
        )
    return queue


def deltas(grant: QuotaGrant, lender: ClusterQueue | None) -> list[Delta]:
    """The grant's changes, in the order they are applied (reverted in reverse)."""
    at = (grant.flavor, grant.resource)
    if grant.kind == GrantKind.BORROWING:
        return [Delta(grant.cluster_queue, *at, BORROWING, grant.amount)]
    if grant.kind == GrantKind.NOMINAL or lender is None:
        return [Delta(grant.cluster_queue, *at, NOMINAL, grant.amount)]
    moved = [
        Delta(lender.name, *at, NOMINAL, -grant.amount),
        Delta(grant.cluster_queue, *at, NOMINAL, grant.amount),
    ]
    nominal = current(lender, *at, NOMINAL) or 0
    if nominal < grant.amount:  # an admin lowered it since the request
        raise PolicyInvalid.single(
            "amount",
            "exceeds-lender",
            f"{lender.name} now has {format_canonical(grant.resource, nominal)} "
            f"{grant.flavor} {grant.resource} nominal quota: it cannot lend "
            f"{format_canonical(grant.resource, grant.amount)}",
        )
    # Kueue refuses a lending limit above the nominal quota: lowered first.
    lending = current(lender, *at, LENDING)
    if lending is not None and lending > nominal - grant.amount:
        moved.insert(0, Delta(lender.name, *at, LENDING, (nominal - grant.amount) - lending))
    return moved


def expire(grant: QuotaGrant, now: datetime) -> bool:
    """Pending past its end → expired (nobody decided in time), compare-and-set."""
    changed = QuotaGrant.objects.filter(
        pk=grant.pk, state=GrantState.PENDING, ends_at__lte=now
    ).update(
        state=GrantState.EXPIRED,
        decided_at=now,
        comment="expired: nobody decided before its end",
    )
    if changed:
        _tell_requester(grant.pk, "expired")
    return bool(changed)


def approve(
    user: Any, grant_id: int, *, comment: str = "", acknowledge: bool = False, key: str = ""
) -> QuotaGrant:
    """Approve and apply grant ``grant_id``. NotAllowed, PolicyInvalid (a long
    comment; ``acknowledge_preemption`` required when a loan would leave
    workloads open to preemption; a change the policy refuses) or
    AlreadyDecided; none of them changes anything."""
    grant = QuotaGrant.objects.select_related("decided_by").get(pk=grant_id)
    check_may_decide(user, grant)
    if _replayed(grant, user, GrantState.ACTIVE, key):
        return grant
    now = timezone.now()
    if grant.state == GrantState.PENDING and grant.ends_at <= now:
        expire(grant, now)
        grant.refresh_from_db()
    if grant.state != GrantState.PENDING:
        raise already(grant, "approved")
    text = _text("comment", comment)
    queue = _queue(grant.cluster_queue, "cluster_queue")
    lender = _queue(grant.lender, "lender") if grant.lender else None
    impact = grant_impact(
        cluster_queue=queue,
        kind=grant.kind,
        flavor=grant.flavor,
        resource=grant.resource,
        amount=grant.amount,
        lender=lender,
        now=now,
    )
    if impact["preempts"] and not acknowledge:
        named = ", ".join(
            f"{row['workload']} ({row['team'] or 'no team'}, {row['amount']} {grant.resource})"
            for row in impact["preempts"]
        )
        raise PolicyInvalid.single(
            "acknowledge_preemption",
            "required",
            f"the loan leaves {grant.lender} below what it runs: {named} would be preempted "
            "when the borrower claims the quota; approve with acknowledge_preemption=true to "
            "go ahead",
        )
    impact["whatif_error"] = grant.impact.get("whatif_error", "")
    with policy_write():
        changed = QuotaGrant.objects.filter(
            pk=grant.pk, state=GrantState.PENDING, ends_at__gt=Now()
        ).update(
            state=GrantState.ACTIVE,
            decided_by=user,
            decided_at=now,
            comment=text,
            decision_key=key,
            acknowledged_preemption=bool(impact["preempts"]),
            impact=impact,
            applied_at=now,
        )
        if changed:
            applied = []
            note = f"quota grant #{grant.pk} approved by {user.get_username()}: {describe(grant)}"
            with noted(note):
                for delta in deltas(grant, lender):
                    lent = delta.cluster_queue == grant.lender
                    made = shift(user, delta, field_path="lender" if lent else "cluster_queue")
                    applied.append(dataclasses.replace(delta, delta=made).as_dict())
            QuotaGrant.objects.filter(pk=grant.pk).update(applied=applied)
    current_grant = QuotaGrant.objects.select_related("decided_by").get(pk=grant.pk)
    if changed:
        log.info("quota grant #%s approved and applied: %s", grant.pk, describe(grant))
        _tell_requester(grant.pk, "approved and applied")
        return current_grant
    if _replayed(current_grant, user, GrantState.ACTIVE, key):
        return current_grant
    raise already(current_grant, "approved")


def reject(user: Any, grant_id: int, *, reason: str, key: str = "") -> QuotaGrant:
    """Reject grant ``grant_id`` with a reason (required); compare-and-set."""
    grant = QuotaGrant.objects.select_related("decided_by").get(pk=grant_id)
    check_may_decide(user, grant)
    if _replayed(grant, user, GrantState.REJECTED, key):
        return grant
    if grant.state != GrantState.PENDING:
        raise already(grant, "rejected")
    text = _text("reason", reason)
    if not text:
        raise PolicyInvalid.single("reason", "required", "a reason is required to reject")
    changed = QuotaGrant.objects.filter(pk=grant.pk, state=GrantState.PENDING).update(
        state=GrantState.REJECTED,
        decided_by=user,
        decided_at=timezone.now(),
        comment=text,
        decision_key=key,
    )
    current_grant = QuotaGrant.objects.select_related("decided_by").get(pk=grant.pk)
    if not changed and not _replayed(current_grant, user, GrantState.REJECTED, key):
        raise already(current_grant, "rejected")
    if changed:
        _tell_requester(grant.pk, "rejected")
    return current_grant


def end(user: Any, grant_id: int, *, reason: str = "") -> QuotaGrant:
    """End grant ``grant_id`` early: an active one is reverted, a pending one
    withdrawn. NotAllowed, PolicyInvalid (a long reason) or AlreadyDecided."""
    grant = QuotaGrant.objects.get(pk=grant_id)
    check_may_end(user, grant)
    text = _text("reason", reason) or f"ended early by {user.get_username()}"
    return _end(user, grant, text)


def _end(user: Any, grant: QuotaGrant, reason: str) -> QuotaGrant:
    now = timezone.now()
    with policy_write():
        grant.refresh_from_db()
        was = grant.state
        if was not in (GrantState.PENDING, GrantState.ACTIVE):
            raise already(grant, "ended")
        changed = QuotaGrant.objects.filter(pk=grant.pk, state=was).update(
            state=GrantState.ENDED, ended_at=now, ended_by=user, end_reason=reason
        )
        if changed and was == GrantState.ACTIVE:
            who = user.get_username() if user is not None else "Berth"
            with noted(f"quota grant #{grant.pk} ended by {who} ({reason}): reverted"):
                reverted = [_revert(user, Delta.from_dict(row)) for row in reversed(grant.applied)]
            QuotaGrant.objects.filter(pk=grant.pk).update(reverted=reverted)
    grant.refresh_from_db()
    if not changed:
        raise already(grant, "ended")
    _tell_requester(grant.pk, "ended")
    return grant


def _revert(user: Any, applied: Delta) -> dict[str, Any]:
    """Take back one applied delta; never raises (what stays is said)."""
    back = dataclasses.replace(applied, delta=-applied.delta)
    row = {**back.as_dict(), "done": 0, "note": ""}
    if not applied.delta:
        return row
    try:
        row["done"] = shift(user, back, field_path=applied.cluster_queue)
    except PolicyInvalid as refused:
        row["note"] = f"left alone: {refused}"
        log.warning("quota grant revert of %s left alone: %s", back.describe(), refused)
        return row
    if row["done"] != back.delta:
        row["note"] = (
            f"took back {format_canonical(applied.resource, abs(row['done']))}: "
            "an admin lowered it meanwhile and it stops at zero"
        )
    return row


def revert_ended(now: datetime | None = None) -> dict[str, int]:
    """The sweep: end every active grant whose end has passed (reverting it),
    and expire every pending one; safe to run twice or concurrently."""
    moment = now or timezone.now()
    ended = 0
    for grant in QuotaGrant.objects.filter(state=GrantState.ACTIVE, ends_at__lte=moment):
        late = moment - grant.ends_at
        reason = f"its end ({when(grant.ends_at)}) passed"
        if late.total_seconds() > 300:
            reason += (
                f"; reverted {round(late.total_seconds() / 60)} min late (Berth was not running)"
            )
        try:
            _end(None, grant, reason)
        except AlreadyDecided:
            continue
        ended += 1
        log.info("quota grant #%s ended at its end and reverted", grant.pk)
    expired = sum(
        expire(grant, moment)
        for grant in QuotaGrant.objects.filter(state=GrantState.PENDING, ends_at__lte=moment)
    )
    return {"ended": ended, "expired": expired}
