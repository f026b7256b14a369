"""Deciding a request: who may, what is refused, and that a decision is taken
once even when two approvers press at the same moment."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from approvals.access import (
    NotAllowed,
    approvers_for,
    decidable_by,
    decidable_now,
    visible_to,
)
from approvals.decide import AlreadyDecided, decide, write_decision
from approvals.models import ApprovalEvent, ApprovalRequest, ApprovalState
from queues.errors import PolicyInvalid
from tests.approvals.approval_support import approval_request, approvers
from tests.celery_broker import wait_until
from tests.jobs.conftest import Org


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return {**org.users, **approvers()}


def unchanged(request: ApprovalRequest) -> None:
    request.refresh_from_db()
    assert request.state == ApprovalState.PENDING and request.decided_by is None
    assert not ApprovalEvent.objects.filter(request=request).exists()


@pytest.mark.parametrize(
    ("who", "rule"),
    [
        ("alice", "requester-cannot-decide"),  # submitted it (and a member)
        ("bob", "not-an-approver"),  # member of another team
        ("dave", "not-an-approver"),  # approver, of another team's queue
    ],
)
def test_who_may_not_decide(people: dict[str, Any], who: str, rule: str) -> None:
    request = approval_request(people["alice"])
    for approve in (True, False):
        with pytest.raises(NotAllowed) as refused:
            decide(people[who], request.pk, approve=approve, comment="because")
        assert refused.value.rule == rule
    unchanged(request)


def test_a_team_approver_may_not_decide_their_own_job(people: dict[str, Any]) -> None:
    request = approval_request(people["carol"])
    with pytest.raises(NotAllowed) as refused:
        decide(people["carol"], request.pk, approve=True)
    assert refused.value.rule == "requester-cannot-decide"
    unchanged(request)
    assert request not in decidable_by(people["carol"])
    assert request in visible_to(people["carol"])


@pytest.mark.parametrize("who", ["carol", "erin", "admin"])
def test_who_may_decide(people: dict[str, Any], who: str) -> None:
    request = approval_request(people["alice"])
    decided = decide(people[who], request.pk, approve=True, comment="ship it")
    assert decided.state == ApprovalState.APPROVED
    assert decided.decided_by == people[who] and decided.comment == "ship it"
    assert list(decided.events.values_list("action", "actor")) == [("approved", people[who].pk)]


def test_a_queue_owned_by_a_team_is_decided_by_that_teams_approvers(
    people: dict[str, Any],
) -> None:
    request = approval_request(people["alice"], cluster_queue="serving", namespace="research")
    with pytest.raises(NotAllowed):
        decide(people["carol"], request.pk, approve=True)
    assert decide(people["dave"], request.pk, approve=True).state == ApprovalState.APPROVED


def test_visibility(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    assert request in visible_to(people["alice"])  # their team's request, read-only
    assert request not in visible_to(people["bob"])
    assert request not in visible_to(people["dave"])
    for who in ("carol", "erin", "admin"):
        assert request in visible_to(people[who]) and request in decidable_by(people[who])
    assert [u.username for u in approvers_for(request)] == ["carol", "erin"]


@pytest.mark.parametrize("reason", ["", "   \n"])
def test_a_rejection_needs_a_reason(people: dict[str, Any], reason: str) -> None:
    request = approval_request(people["alice"])
    with pytest.raises(PolicyInvalid) as refused:
        decide(people["carol"], request.pk, approve=False, comment=reason)
    assert [(e.field, e.rule) for e in refused.value.errors] == [("reason", "required")]
    unchanged(request)


def test_a_comment_has_a_length_limit(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    with pytest.raises(PolicyInvalid) as refused:
        decide(people["carol"], request.pk, approve=True, comment="x" * 4001)
    assert [(e.field, e.rule) for e in refused.value.errors] == [("comment", "max-length")]
    unchanged(request)


def test_a_second_decision_is_refused_and_names_the_first(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    decide(people["carol"], request.pk, approve=True)
    with pytest.raises(AlreadyDecided) as refused:
        decide(people["erin"], request.pk, approve=False, comment="no")
    assert refused.value.rule == "already-decided"
    assert "approved by carol" in refused.value.message
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.decided_by == people["carol"]
    assert request.events.count() == 1


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        # Statistics are read once per transaction unless the snapshot is dropped.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_the_same_moment_make_one_decision(people: dict[str, Any]) -> None:
    """Both read the request pending and both reach the compare-and-set: the
    row is held locked until both wait on it, so neither is stopped by its read."""
    request = approval_request(people["alice"])
    outcomes: dict[str, Any] = {}

    def press(who: str, approve: bool) -> None:
        try:
            outcomes[who] = decide(
                people[who], request.pk, approve=approve, comment=f"{who} says so"
            ).state
        except AlreadyDecided as exc:
            outcomes[who] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=press, args=("carol", True)),
        threading.Thread(target=press, args=("erin", False)),
    ]
    with transaction.atomic():
        ApprovalRequest.objects.select_for_update().get(pk=request.pk)
        for thread in threads:
            thread.start()
        wait_until(lambda: _waiting_on_locks() >= 2, "both decisions to wait on the row")
    for thread in threads:
        thread.join(timeout=30)
    request.refresh_from_db()
    winners = [who for who, result in outcomes.items() if not isinstance(result, Exception)]
    losers = [who for who, result in outcomes.items() if isinstance(result, AlreadyDecided)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert request.decided_by == people[winners[0]]
    assert f"by {winners[0]}" in outcomes[losers[0]].message
    assert request.events.filter(action__in=["approved", "rejected"]).count() == 1


def test_a_request_past_its_deadline_cannot_be_approved(people: dict[str, Any]) -> None:
    """Past the deadline it is expired, even before a controller pass says so."""
    from datetime import timedelta

    from django.utils import timezone

    request = approval_request(
        people["alice"],
        created_at=timezone.now() - timedelta(hours=5),
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert request not in decidable_now(people["carol"])
    with pytest.raises(AlreadyDecided) as refused:
        decide(people["carol"], request.pk, approve=True)
    assert "already expired" in refused.value.message
    request.refresh_from_db()
    assert request.state == ApprovalState.EXPIRED and request.decided_by is None
    assert list(request.events.values_list("action", flat=True)) == ["expired"]


@pytest.mark.django_db(transaction=True)
def test_a_decision_racing_the_expiry_at_the_deadline_loses(people: dict[str, Any]) -> None:
    """An approver presses just before the deadline while the controller pass
    expires the request: one of the two changes the row, and the approver is
    told it expired."""
    import time
    from datetime import timedelta

    from django.utils import timezone

    from approvals.decide import expire

    request = approval_request(people["alice"], expires_at=timezone.now() + timedelta(seconds=2))
    outcome: dict[str, Any] = {}

    def press() -> None:
        try:
            outcome["result"] = decide(people["carol"], request.pk, approve=True)
        except AlreadyDecided as exc:
            outcome["result"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=press)
    with transaction.atomic():  # the pass, holding the row while it expires it
        ApprovalRequest.objects.select_for_update().get(pk=request.pk)
        thread.start()
        wait_until(lambda: _waiting_on_locks() >= 1, "the decision to wait on the row")
        while timezone.now() <= request.expires_at:
            time.sleep(0.1)
        assert expire(request, timezone.now())
    thread.join(timeout=30)
    assert isinstance(outcome["result"], AlreadyDecided), outcome
    assert "already expired" in outcome["result"].message
    request.refresh_from_db()
    assert request.state == ApprovalState.EXPIRED and request.decided_by is None
    # Expired, then closed by the apply task (no Workload here); never approved.
    assert list(request.events.values_list("action", flat=True)) == ["expired", "applied"]


def test_the_deadline_is_the_databases_clock_not_the_web_pods(people: dict[str, Any]) -> None:
    """A web pod whose clock lags believes the request is still open: the
    write refuses it anyway, by the database's clock."""
    request = approval_request(people["alice"], expires_at=timezone.now() - timedelta(seconds=30))
    lagging_clock = request.expires_at - timedelta(minutes=5)
    written = write_decision(request, people["carol"], approve=True, text="", now=lagging_clock)
    assert written is False
    unchanged(request)
    # Before the deadline by the database's clock, the same write goes through.
    open_request = approval_request(
        people["alice"], workload_uid="uid-open", expires_at=timezone.now() + timedelta(hours=1)
    )
    assert write_decision(open_request, people["carol"], approve=True, text="", now=timezone.now())
