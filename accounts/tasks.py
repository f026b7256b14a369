from __future__ import annotations

from celery import shared_task
from django.conf import settings

from accounts.services import prune_access_denials as prune


@shared_task(name="accounts.tasks.prune_access_denials")
def prune_access_denials(older_than_days: int | None = None) -> int:
    """Drop refused-attempt records past the retention window. Safe to run twice."""
    days = older_than_days or settings.BERTH_AUDIT_RETENTION_DAYS
    return prune(older_than_days=days)
