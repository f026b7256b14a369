"""Celery tasks of the approval controller. Task names keep the
``jobs.tasks.`` prefix they had before ``jobs/`` was split, so messages queued
under them and beat's stored schedule still find their task."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from approvals.apply import apply_decision
from approvals.controller import drive_approvals as drive_approvals_once
from cluster.retry import retry_later
from queues.backends import get_backend
from queues.backends.base import BackendError


@shared_task(name="jobs.tasks.drive_approvals", acks_late=True)
def drive_approvals() -> dict[str, int]:
    """One approval controller pass: raise, notify, expire, re-drive decisions."""
    return drive_approvals_once(get_backend())


@shared_task(name="jobs.tasks.apply_approval", bind=True, acks_late=True, max_retries=5)
def apply_approval(self: Any, request_id: int) -> str:
    """Write one decision to its Workload (queued when it is taken); the
    periodic pass re-drives it if this task is lost or its write failed (the
    failure is on the request's audit trail)."""
    try:
        return apply_decision(get_backend(), request_id)
    except BackendError as exc:
        if exc.transient:
            return retry_later(self, exc)
        if self.request.is_eager:  # inside the deciding request: it still answers
            return "failed"
        raise
