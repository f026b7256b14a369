"""The quota grants' beat sweep."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from grants.lifecycle import revert_ended
from grants.notify import notify_outcome, notify_requested


@shared_task(name="grants.tasks.revert_ended_grants", acks_late=True)
def revert_ended_grants() -> dict[str, int]:
    """Revert every active grant whose end has passed (and expire pending
    ones); a grant whose end passed while Berth was down is reverted on the
    first sweep after it comes back."""
    return revert_ended()


@shared_task(name="grants.tasks.notify_grant", acks_late=True)
def notify_grant(grant_id: int) -> dict[str, Any]:
    """Tell the deciders of a new grant (queued when it is asked for)."""
    return notify_requested(grant_id)


@shared_task(name="grants.tasks.notify_grant_outcome", acks_late=True)
def notify_grant_outcome(grant_id: int) -> dict[str, Any]:
    """Tell a grant's requester what became of it (queued when it changes)."""
    return notify_outcome(grant_id)
