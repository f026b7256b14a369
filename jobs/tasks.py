"""Celery tasks that bring what the cluster did into Postgres. Safe to repeat
or overlap: sync upserts by uid and events are unique, snapshots are keyed by
their (second-rounded) time."""

from __future__ import annotations

from celery import shared_task

from jobs.sync import snapshot_cluster, sync_queue_status, sync_workloads
from queues.backends import get_backend


@shared_task(name="jobs.tasks.sync_cluster", acks_late=True)
def sync_cluster() -> dict[str, int | str]:
    """List workloads into WorkloadRecord/WorkloadEvent, mirror queue status,
    then snapshot queue usage and node capacity. Returns the list's
    resourceVersion and row counts."""
    backend = get_backend()
    resource_version = sync_workloads(backend)
    statuses = sync_queue_status(backend)
    queues, capacity = snapshot_cluster(backend)
    return {
        "resource_version": resource_version,
        "queue_statuses": statuses,
        "queues": queues,
        "capacity": capacity,
    }
