"""Policy writes are serialised by a PostgreSQL advisory lock, so a whole-tree rule
(no cohort cycle) holds even when two admins edit at the same moment."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from queues import services
from queues.errors import PolicyInvalid
from queues.models import Cohort
from queues.services.common import policy_write
from tests.factories import cohort

pytestmark = pytest.mark.django_db(transaction=True)


def test_second_writer_waits_for_the_first_and_then_sees_its_change() -> None:
    a, b = cohort("a"), cohort("b")
    outcome: dict[str, Any] = {}

    def make_a_child_of_b() -> None:
        try:
            services.cohorts.update(
                actor=None, obj=Cohort.objects.get(pk=a.pk), data={"parent": "b"}
            )
            outcome["result"] = "saved"
        except PolicyInvalid as exc:
            outcome["result"] = [e.rule for e in exc.errors]
        finally:
            connection.close()

    with policy_write():
        # This transaction holds the lock: the other writer must wait, not validate
        # against the state before our change.
        writer = threading.Thread(target=make_a_child_of_b)
        writer.start()
        writer.join(timeout=1.0)
        assert writer.is_alive(), "the second writer did not wait for the policy lock"
        Cohort.objects.filter(pk=b.pk).update(parent=a)
    writer.join(timeout=30)
    assert outcome["result"] == ["cohort-cycle"]
    assert Cohort.objects.get(pk=a.pk).parent is None


def test_concurrent_opposite_parents_leave_a_tree() -> None:
    a, b = cohort("a"), cohort("b")
    barrier = threading.Barrier(2)
    results: list[str] = []

    def set_parent(child: int, parent: str) -> None:
        barrier.wait()
        try:
            services.cohorts.update(
                actor=None, obj=Cohort.objects.get(pk=child), data={"parent": parent}
            )
            results.append("saved")
        except PolicyInvalid:
            results.append("refused")
        finally:
            connection.close()

    threads = [
        threading.Thread(target=set_parent, args=(a.pk, "b")),
        threading.Thread(target=set_parent, args=(b.pk, "a")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == ["refused", "saved"]
    parents = {c.name: c.parent_id for c in Cohort.objects.all()}
    assert list(parents.values()).count(None) == 1
