"""Celery tasks of the approval controller. Task names keep the
``jobs.tasks.`` prefix they had before ``jobs/`` was split, so messages queued
under them and beat's stored schedule still find their task."""

from __future__ import annotations

from celery import shared_task

from approvals.apply import apply_decision
from approvals.controller import drive_approvals as drive_approvals_once
from approvals.fairness_alerts import evaluate_fair_shares as evaluate_fair_shares_once
from cluster.retry import ClusterTask
from queues.backends import get_backend


@shared_task(name="jobs.tasks.drive_approvals", acks_late=True)
def drive_approvals() -> dict[str, int]:
    """One approval controller pass: raise, notify, expire, re-drive decisions."""
    return drive_approvals_once(get_backend())


@shared_task(name="jobs.tasks.apply_approval", base=ClusterTask, acks_late=True)
def apply_approval(request_id: int) -> str:
    """Write one decision to its Workload (queued when it is taken); a
    transient error is retried (``ClusterTask``), and the periodic pass
    re-drives it if this task is lost or its write failed (the failure is on
    the request's audit trail)."""
    return apply_decision(get_backend(), request_id)


@shared_task(name="approvals.tasks.evaluate_fair_shares", acks_late=True)
def evaluate_fair_shares() -> dict[str, int]:
    """Every minute: each team's fair-share figures, and a notice when a team
    starts or stops starving (``approvals.fairness_alerts``)."""
    return evaluate_fair_shares_once()
