"""Two approvers press approve on one grant at the same moment, through the
API on PostgreSQL: one wins and applies it once, the other is answered 409
``already-decided`` naming the winner."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from grants import lifecycle
from grants.models import GrantState, QuotaGrant
from grants.services import AlreadyDecided, request_grant
from queues.models import PolicyChange
from queues.services.common import policy_write
from tests.celery_broker import wait_until
from tests.grants.conftest import ask
from tests.grants.test_grant_lifecycle import nominal
from tests.jobs.conftest import Org


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_once_decide_once(org: Org, carol_client: Any) -> None:
    grant = org.alice.post("/api/v1/quota-grants/", ask(), format="json").json()
    answers: dict[str, Any] = {}
    approvers = {"carol": carol_client, "root": org.admin}

    def press(who: str) -> None:
        try:
            answers[who] = approvers[who].post(
                f"/api/v1/quota-grants/{grant['id']}/approve/",
                {"comment": f"{who} says so"},
                format="json",
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=press, args=(who,)) for who in approvers]
    # Both read the grant pending, then wait on the policy lock held here:
    # released together, both reach the compare-and-set.
    with policy_write():
        for thread in threads:
            thread.start()
        wait_until(lambda: _waiting_on_locks() >= 2, "both approvals to wait on the policy lock")
    for thread in threads:
        thread.join(timeout=60)
    codes = sorted(answer.status_code for answer in answers.values())
    assert codes == [200, 409], {who: a.content for who, a in answers.items()}
    winner = next(who for who, answer in answers.items() if answer.status_code == 200)
    loser = next(answer for answer in answers.values() if answer.status_code == 409)
    assert loser.json()["rule"] == "already-decided"
    assert f"decided by {winner}" in loser.json()["detail"]
    stored = QuotaGrant.objects.get(pk=grant["id"])
    assert stored.state == GrantState.ACTIVE and stored.decided_by.username == winner
    assert nominal("research") == 32  # applied once, not twice
    assert PolicyChange.objects.filter(note__startswith=f"quota grant #{grant['id']}").count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_early_end_racing_the_sweep_reverts_once(org: Org, carol: Any) -> None:
    grant = lifecycle.approve(carol, request_grant(org.users["alice"], ask()).pk)
    QuotaGrant.objects.filter(pk=grant.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    results: dict[str, Any] = {}

    def run(who: str) -> None:
        try:
            if who == "alice":
                results[who] = lifecycle.end(org.users["alice"], grant.pk, reason="done").state
            else:
                results[who] = lifecycle.revert_ended()
        except AlreadyDecided as exc:
            results[who] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(who,)) for who in ("alice", "sweep")]
    with policy_write():
        for thread in threads:
            thread.start()
        wait_until(lambda: _waiting_on_locks() >= 2, "the end and the sweep to wait on the lock")
    for thread in threads:
        thread.join(timeout=60)
    assert nominal("research") == 16  # taken back once, not twice (0)
    ended_by_sweep = results["sweep"] == {"ended": 1, "expired": 0}
    ended_by_alice = results["alice"] == GrantState.ENDED
    assert ended_by_sweep != ended_by_alice, results  # exactly one of them ended it
    reverts = PolicyChange.objects.filter(note__startswith=f"quota grant #{grant.pk} ended")
    assert reverts.count() == 1
