"""/metrics tells how the approval controller is doing: requests by state,
the oldest pending one's wait, and decisions not yet on their Workload."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from approvals.models import ApprovalState
from tests.approvals.approval_support import approval_request
from tests.cluster.metrics_support import one, scrape
from tests.jobs.conftest import Org


def test_approval_families(org: Org, client: Client) -> None:
    alice = org.users["alice"]
    now = timezone.now()
    approval_request(alice, created_at=now - timedelta(minutes=30))
    approval_request(alice, created_at=now - timedelta(minutes=5))
    approval_request(alice, state=ApprovalState.APPROVED, decided_at=now)  # not written yet
    approval_request(alice, state=ApprovalState.REJECTED, decided_at=now, applied_at=now)
    families = scrape(client)
    assert one(families, "berth_approval_requests", state="pending") == 2
    assert one(families, "berth_approval_requests", state="approved") == 1
    assert one(families, "berth_approval_requests", state="expired") == 0
    assert 30 * 60 <= one(families, "berth_approval_oldest_pending_seconds") < 31 * 60
    assert one(families, "berth_approval_undelivered_decisions") == 1


def test_nothing_waiting_reads_zero(db: Any, client: Client) -> None:
    families = scrape(client)
    assert one(families, "berth_approval_oldest_pending_seconds") == 0
    assert one(families, "berth_approval_undelivered_decisions") == 0
