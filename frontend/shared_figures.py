"""Figures every viewer of a page sees alike — the cluster's capacity, the
waits, the queues' rows — built once and handed to every viewer while the
records they come from have not moved on (``marks``: the sync's latest run,
the latest reconcile, the policy's version …), and for at most
``BERTH_SHARED_FIGURES_SECONDS`` in any case, since the workload watch moves
live records between syncs. What differs per viewer (their teams' counts,
their approvals) is never kept here. The cache is per process."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max

from cluster.models import SyncStepHealth
from queues.models import ReconcileRun

T = TypeVar("T")


def shared_figures(name: str, marks: tuple[object, ...], build: Callable[[], T]) -> T:
    seconds = int(settings.BERTH_SHARED_FIGURES_SECONDS)
    if seconds <= 0:
        return build()
    digest = hashlib.blake2b(repr(marks).encode(), digest_size=12).hexdigest()
    key = f"shared-figures:{name}:{digest}"
    found = cache.get(key)
    if found is not None:
        return found
    figures = build()
    cache.set(key, figures, seconds)
    return figures


def sync_and_reconcile_marks() -> tuple[object, ...]:
    """When a sync step last ran, and the latest reconcile run (plans too) and
    where it stands: two indexed reads."""
    last_sync = SyncStepHealth.objects.aggregate(at=Max("last_run_at"))["at"]
    run = ReconcileRun.objects.order_by("-pk").values_list("pk", "status", "finished_at").first()
    return (last_sync, run)
