"""Two approvers press approve on one grant at the same moment, through the
API on PostgreSQL: one wins and applies it once, the other is answered 409
``already-decided`` naming the winner."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from grants.models import GrantState, QuotaGrant
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
