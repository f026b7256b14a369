"""The decision's compare-and-set and expiry, row by row: a decision or an
expiry changes exactly the one request it names, only while it is pending and
on the right side of its deadline, stores what was decided, when and by whom,
audits it at that moment, and queues its write to the Workload (saying what is
stored when the task queue refuses it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals.decide import APPLY_APPROVAL, decide, expire, write_decision
from approvals.lifecycle import expire_requests
from approvals.models import ApprovalRequest, ApprovalState
from tests.approvals.approval_support import approval_request, approvers
from tests.jobs.conftest import Org


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return {**org.users, **approvers()}


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], str]]:
    """What after_commit hands the task queue (nothing is really queued)."""
    calls: list[tuple[str, tuple[Any, ...], str]] = []

    def send(task_name: str, *args: Any, stored: str) -> bool:
        calls.append((task_name, args, stored))
        return True

    monkeypatch.setattr("queues.deferred.send", send)
    return calls


def pending(request: ApprovalRequest) -> bool:
    request.refresh_from_db()
    return (
        request.state == ApprovalState.PENDING
        and request.decided_at is None
        and request.decided_by is None
        and not request.events.exists()
    )


def past(people: dict[str, Any], uid: str) -> ApprovalRequest:
    now = timezone.now()
    return approval_request(
        people["alice"],
        workload_uid=uid,
        created_at=now - timedelta(hours=2),
        expires_at=now - timedelta(seconds=1),
    )


# ------------------------------------------------------------------ expiry


def test_an_expiry_changes_only_its_request_and_records_when_and_why(
    people: dict[str, Any], django_capture_on_commit_callbacks: Any, sent: list[Any]
) -> None:
    first, second = past(people, "uid-a"), past(people, "uid-b")
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert expire(first, now) is True
    first.refresh_from_db()
    assert (first.state, first.decided_at, first.comment, first.decided_by) == (
        ApprovalState.EXPIRED,
        now,
        "expired",
        None,
    )
    event = first.events.get()
    assert (event.action, event.at, event.actor, event.message) == (
        "expired",
        now,
        None,
        "expired: nobody decided within 120 minutes",
    )
    assert sent == [(APPLY_APPROVAL, (first.pk,), f"approval #{first.pk}: decided")]
    assert pending(second)


def test_an_expiry_waits_for_the_deadline_it_is_given(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"], expires_at=timezone.now() + timedelta(hours=1))
    assert expire(request, request.expires_at - timedelta(microseconds=1)) is False
    assert pending(request)
    assert expire(request, request.expires_at) is True  # at the deadline it is over
    request.refresh_from_db()
    assert request.state == ApprovalState.EXPIRED


@pytest.mark.parametrize("state", [ApprovalState.APPROVED, ApprovalState.WITHDRAWN])
def test_an_expiry_leaves_a_request_no_longer_pending(
    people: dict[str, Any], state: ApprovalState
) -> None:
    request = past(people, "uid-a")
    decided_at = timezone.now() - timedelta(minutes=5)
    ApprovalRequest.objects.filter(pk=request.pk).update(
        state=state, decided_at=decided_at, comment="decided before"
    )
    assert expire(request, timezone.now()) is False
    request.refresh_from_db()
    assert (request.state, request.decided_at, request.comment) == (
        state,
        decided_at,
        "decided before",
    )
    assert not request.events.exists()


def test_the_pass_expires_every_pending_request_past_the_time_it_is_given(
    people: dict[str, Any],
) -> None:
    now = timezone.now()
    overdue = [past(people, "uid-a"), past(people, "uid-b")]
    at_deadline = approval_request(people["alice"], workload_uid="uid-c", expires_at=now)
    open_one = approval_request(
        people["alice"], workload_uid="uid-d", expires_at=now + timedelta(seconds=1)
    )
    decided = past(people, "uid-e")
    ApprovalRequest.objects.filter(pk=decided.pk).update(state=ApprovalState.REJECTED)
    expired = expire_requests(now)
    assert sorted(expired) == sorted([*(r.pk for r in overdue), at_deadline.pk])
    for request in [*overdue, at_deadline]:
        request.refresh_from_db()
        assert (request.state, request.decided_at) == (ApprovalState.EXPIRED, now)
    assert pending(open_one)
    assert expire_requests(now) == []


# ------------------------------------------------------------------ the decision's write


@pytest.mark.parametrize("approve", [True, False], ids=["approve", "reject"])
def test_a_decision_writes_its_request_once_with_who_when_and_why(
    people: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
    sent: list[Any],
    approve: bool,
) -> None:
    request = approval_request(people["alice"])
    other = approval_request(people["alice"], workload_uid="uid-other")
    now = timezone.now() - timedelta(seconds=3)  # the app's clock: stored as given
    with django_capture_on_commit_callbacks(execute=True):
        assert write_decision(
            request, people["carol"], approve=approve, text="ship it", now=now, key="k-1"
        )
    state = ApprovalState.APPROVED if approve else ApprovalState.REJECTED
    stored = ApprovalRequest.objects.get(pk=request.pk)
    assert (
        stored.state,
        stored.decided_by,
        stored.decided_at,
        stored.comment,
        stored.decision_key,
    ) == (state, people["carol"], now, "ship it", "k-1")
    # The caller's object is the stored row (the API answers from it).
    assert (request.state, request.decided_by_id, request.decision_key) == (
        state,
        people["carol"].pk,
        "k-1",
    )
    event = stored.events.get()
    assert (event.action, event.actor, event.at, event.message) == (
        state,
        people["carol"],
        now,
        "ship it",
    )
    assert sent == [(APPLY_APPROVAL, (request.pk,), f"approval #{request.pk}: decided")]
    assert pending(other)
    # Decided: a second write changes nothing.
    assert not write_decision(request, people["erin"], approve=not approve, text="no", now=now)
    stored.refresh_from_db()
    assert (stored.state, stored.decided_by) == (state, people["carol"])


def test_a_decision_without_a_key_stores_no_key(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    assert write_decision(request, people["carol"], approve=True, text="", now=timezone.now())
    request.refresh_from_db()
    assert request.decision_key == ""


def test_a_decision_on_a_request_no_longer_pending_is_not_written(
    people: dict[str, Any],
) -> None:
    request = approval_request(people["alice"])
    ApprovalRequest.objects.filter(pk=request.pk).update(state=ApprovalState.WITHDRAWN)
    assert not write_decision(request, people["carol"], approve=True, text="", now=timezone.now())
    request.refresh_from_db()
    assert (request.state, request.decided_by) == (ApprovalState.WITHDRAWN, None)
    assert not request.events.exists()


def test_a_decision_whose_write_cannot_be_queued_is_stored_and_says_so(
    people: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("queues.deferred.send", lambda *args, stored: False)
    told: list[str] = []
    request = approval_request(people["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        assert write_decision(
            request,
            people["carol"],
            approve=True,
            text="",
            now=timezone.now(),
            on_unqueued=lambda: told.append("told"),
        )
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED
    assert list(request.events.values_list("action", flat=True)) == ["approved", "apply-failed"]
    assert told == ["told"]


def test_decide_stores_the_comment_and_key_it_is_given_and_none_by_default(
    people: dict[str, Any],
) -> None:
    request = approval_request(people["alice"])
    decided = decide(people["carol"], request.pk, approve=True)
    assert (decided.state, decided.comment, decided.decision_key) == (
        ApprovalState.APPROVED,
        "",
        "",
    )
    other = approval_request(people["alice"], workload_uid="uid-other")
    decided = decide(people["carol"], other.pk, approve=True, comment="go", key="k-9")
    assert (decided.comment, decided.decision_key) == ("go", "k-9")
    # Sent again under its key, it is answered as the first (not already decided).
    assert decide(people["carol"], other.pk, approve=True, key="k-9").pk == other.pk


def test_a_decision_whose_reservation_has_ended_is_closed_unwritten_at_once(
    people: dict[str, Any], django_capture_on_commit_callbacks: Any, sent: list[Any]
) -> None:
    request = approval_request(people["alice"])
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert write_decision(
            request, people["carol"], approve=False, text="no", now=now, superseded="it ended"
        )
    # The caller's object says so too (the API answers from it).
    assert (request.applied_at, request.written) == (now, False)
    request.refresh_from_db()
    assert (request.state, request.applied_at, request.written) == (
        ApprovalState.REJECTED,
        now,
        False,
    )
    assert list(request.events.values_list("action", "message", "at")) == [
        ("rejected", "no", now),
        ("applied", "superseded: it ended", now),
    ]
    assert sent == []  # nothing to write it to
