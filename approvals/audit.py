"""The approval audit trail: one ApprovalEvent per state change or side effect."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest


def record(
    request: ApprovalRequest,
    action: ApprovalAction,
    *,
    actor: Any = None,
    message: str = "",
    details: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> ApprovalEvent:
    return ApprovalEvent.objects.create(
        request=request,
        action=action,
        actor=actor if getattr(actor, "pk", None) else None,
        at=at or timezone.now(),
        message=message,
        details=details or {},
    )
