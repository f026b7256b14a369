"""Celery tasks of the cluster app: bring what the cluster did into Postgres.
Safe to repeat: sync upserts by uid and events are unique, and snapshots
are keyed by their (second-rounded) time. Never two at once: a sync that finds
another running skips (a lock), so slow syncs do not stack up. Task names keep the
``jobs.tasks.`` prefix they had before ``jobs/`` was split, so messages queued
under them and beat's stored schedule still find their task."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from cluster import retention
from cluster.sync_steps import run_sync
from queues.locks import try_lock

log = logging.getLogger(__name__)
SYNC_LOCK = "berth:sync-cluster"


@shared_task(name="jobs.tasks.sync_cluster", acks_late=True)
def sync_cluster() -> dict[str, Any]:
    """List workloads into WorkloadRecord/WorkloadEvent, mirror queue status,
    follow the jobs, snapshot queue usage and node capacity, refresh the
    forecasts: each step on its own, so one that fails (a 403 listing JobSets)
    stops none of the others, and each step's health is recorded. Returns the
    list's resourceVersion and row counts, and ``errors`` by step if any failed;
    ``{"skipped": ...}`` when another sync is still running."""
    with try_lock(SYNC_LOCK) as taken:
        if not taken:
            log.info("sync skipped: another sync is still running")
            return {"skipped": "another sync is still running"}
        return run_sync().as_dict()


@shared_task(name="cluster.tasks.prune_history", acks_late=True, ignore_result=True)
def prune_history() -> dict[str, object]:
    """Keep recorded history within its retention (``cluster.retention``);
    batched, and safe to run again or alongside sync."""
    return retention.prune_history().as_dict()
