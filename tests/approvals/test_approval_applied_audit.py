"""A decision's delivery is closed together with its APPLIED audit event: a
worker that dies between the two (the chaos test kills workers mid-task)
leaves neither, and the next pass delivers it again."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from approvals import apply as approval_apply
from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from tests.approvals.approval_support import approval_request, approvers
from tests.jobs.conftest import Org


def test_a_delivery_is_not_closed_without_its_audit_event(
    org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    people: dict[str, Any] = {**org.users, **approvers()}
    request = approval_request(people["alice"])
    ApprovalRequest.objects.filter(pk=request.pk).update(state=ApprovalState.APPROVED)

    def killed(*args: Any, **kwargs: Any) -> None:
        raise SystemExit("the worker was killed here")

    monkeypatch.setattr(approval_apply, "record", killed)
    with pytest.raises(SystemExit):
        approval_apply._mark_applied(request, timezone.now(), "written")
    assert ApprovalRequest.objects.get(pk=request.pk).applied_at is None

    monkeypatch.undo()
    assert approval_apply._mark_applied(request, timezone.now(), "written", written=True)
    assert ApprovalRequest.objects.get(pk=request.pk).applied_at is not None
    applied = ApprovalEvent.objects.filter(request=request, action=ApprovalAction.APPLIED)
    assert applied.count() == 1
