"""Celery tasks for the cluster side. Thin: they take ids (or nothing), call a
service, and are safe to run twice or at the same time."""

from __future__ import annotations

from celery import shared_task

from queues.kueue_import import read_for_import
from queues.models import ReconcileRun
from queues.reconcile import (
    applied_policy_version,
    policy_version,
    reconcile_configured_cluster,
    recover_lost_runs,
)
from queues.simulation.runner import step


@shared_task(name="queues.tasks.reconcile_policy", acks_late=True)
def reconcile_policy(trigger: str = ReconcileRun.Trigger.POLICY_CHANGE) -> int:
    """Bring the cluster in line with the policy; level-based, so a repeat or a
    run after a crash converges to the same state. Returns the run's id."""
    return int(reconcile_configured_cluster(trigger=trigger).pk)


@shared_task(name="queues.tasks.sweep_reconcile", acks_late=True, ignore_result=True)
def sweep_reconcile() -> bool:
    """The intent is the policy in Postgres: if the cluster is behind it (a lost
    task, a killed worker, a Redis restart), queue a reconcile. Returns whether
    one was queued."""
    lost = recover_lost_runs()
    if lost or policy_version() != applied_policy_version():
        reconcile_policy.delay(ReconcileRun.Trigger.RECOVERY)
        return True
    return False


@shared_task(name="queues.tasks.plan_policy", acks_late=True)
def plan_policy() -> int:
    """Compute (not apply) the changes a reconcile would make, for the API."""
    return int(reconcile_configured_cluster(trigger=ReconcileRun.Trigger.PLAN, dry_run=True).pk)


@shared_task(name="queues.tasks.step_simulated_cluster", acks_late=True, ignore_result=True)
def step_simulated_cluster() -> bool:
    """Advance the simulated cluster to now (no-op on a real cluster, or while
    another worker is stepping it). Returns whether this call stepped it."""
    return step() is not None


@shared_task(name="queues.tasks.read_kueue_cluster", acks_late=True, ignore_result=True)
def read_kueue_cluster(reading_id: int) -> None:
    """Read the cluster's Kueue objects for the import page (a repeat reads
    again into the same reading)."""
    read_for_import(reading_id)
