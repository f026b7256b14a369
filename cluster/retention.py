"""How long each kind of recorded history is kept, and the prune that keeps
it so. Sync writes snapshots every ``BERTH_SYNC_INTERVAL`` seconds and events
as they happen; without this every table grows forever.

- Snapshots (queue usage, node capacity, team usage, gang fit) are thinned as they age:
  every one for the first ``BERTH_SNAPSHOTS_FULL_HOURS``, then one per five
  minutes up to ``BERTH_SNAPSHOTS_5MIN_HOURS``, one per hour up to
  ``BERTH_SNAPSHOTS_HOURLY_DAYS``, and one per day after that. The one kept
  in each bucket is its first instant, so a second prune keeps the same ones.
- Workload records that ended (finished, failed, deactivated, deleted) go,
  with their events and forecasts, ``BERTH_WORKLOAD_RETENTION_DAYS`` after
  sync last saw them change; a job keeps its own figures (wait, GPU-hours),
  and the hourly rollups keep the counts the dashboard charts.
- Hourly rollups go after ``BERTH_ROLLUP_RETENTION_DAYS``, and reconcile runs
  after ``BERTH_RECONCILE_RETENTION_DAYS`` (those that found drift stay).

Every delete is one statement over at most ``batch`` rows or instants, each
in its own transaction, so a year of backlog never holds a lock for long.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Model
from django.utils import timezone

from cluster.models import (
    BorrowingRollup,
    CapacitySnapshot,
    FairShareRollup,
    GangFitSnapshot,
    PreemptionRollup,
    QueueSnapshot,
    TeamUsageSnapshot,
    WaitRollup,
    WorkloadRecord,
    WorkloadState,
)
from queues.models import ReconcileRun

SNAPSHOTS: tuple[type[Model], ...] = (
    QueueSnapshot,
    CapacitySnapshot,
    TeamUsageSnapshot,
    GangFitSnapshot,
)
ROLLUPS: tuple[type[Model], ...] = (WaitRollup, PreemptionRollup, BorrowingRollup, FairShareRollup)
ENDED = (
    WorkloadState.FINISHED,
    WorkloadState.FAILED,
    WorkloadState.DEACTIVATED,
    WorkloadState.DELETED,
)
FIVE_MINUTES, HOUR, DAY = 300, 3600, 86400


@dataclass(frozen=True)
class Tier:
    """Snapshots from ``start`` to ``end`` keep one instant per ``bucket`` seconds."""

    start: datetime
    end: datetime
    bucket: int


def tiers(now: datetime) -> list[Tier]:
    """The thinning tiers at ``now``, newest first (the newest stretch is kept whole)."""
    full = now - timedelta(hours=settings.BERTH_SNAPSHOTS_FULL_HOURS)
    five = now - timedelta(hours=settings.BERTH_SNAPSHOTS_5MIN_HOURS)
    hourly = now - timedelta(days=settings.BERTH_SNAPSHOTS_HOURLY_DAYS)
    epoch = datetime(1970, 1, 1, tzinfo=now.tzinfo)
    return [
        Tier(five, full, FIVE_MINUTES),
        Tier(hourly, five, HOUR),
        Tier(epoch, hourly, DAY),
    ]


def surplus_instants(instants: list[datetime], bucket: int) -> list[datetime]:
    """Of sorted ``instants``, every one but the first in its bucket (buckets
    aligned to the epoch, so the choice does not depend on when it runs)."""
    surplus, seen = [], set()
    for at in instants:
        key = int(at.timestamp()) // bucket
        if key in seen:
            surplus.append(at)
        else:
            seen.add(key)
    return surplus


@dataclass
class PruneReport:
    """Rows deleted per table, and the longest single delete (seconds)."""

    deleted: dict[str, int] = field(default_factory=dict)
    longest_statement: float = 0.0

    def add(self, model: type[Model], count: int, seconds: float) -> None:
        name = model._meta.db_table
        self.deleted[name] = self.deleted.get(name, 0) + count
        self.longest_statement = max(self.longest_statement, seconds)

    def as_dict(self) -> dict[str, object]:
        return {"deleted": dict(self.deleted), "longest_statement": self.longest_statement}


def _timed_delete(report: PruneReport, model: type[Model], **lookup: object) -> int:
    started = time.monotonic()  # a duration: the wall clock may be moved (tests, NTP)
    count, _ = model._default_manager.filter(**lookup).delete()
    report.add(model, count, time.monotonic() - started)
    return count


def _windows(
    start: datetime, end: datetime, span: timedelta
) -> Iterator[tuple[datetime, datetime]]:
    """[start, end) in pieces of ``span``, aligned to the bucket grid by the caller."""
    at = start
    while at < end:
        yield at, min(end, at + span)
        at += span


def thin_snapshots(model: type[Model], tier: Tier, report: PruneReport, batch: int) -> None:
    """Delete ``model``'s surplus instants in ``tier``, a day of instants at a time."""
    manager = model._default_manager
    oldest = (
        manager.filter(at__lt=tier.end, at__gte=tier.start)
        .order_by("at")
        .values_list("at", flat=True)
        .first()
    )
    if oldest is None:
        return
    # Start on a bucket boundary: a window then never splits a bucket.
    start = datetime.fromtimestamp(
        int(oldest.timestamp()) // tier.bucket * tier.bucket, tz=tier.end.tzinfo
    )
    span = timedelta(seconds=max(DAY, tier.bucket))
    for low, high in _windows(start, tier.end, span):
        # One row per queue (or flavor, team) at each instant: distinct
        # instants only, with the models' ordering cleared (it would make
        # DISTINCT cover the other columns too).
        instants = set(
            manager.filter(at__gte=max(low, tier.start), at__lt=high)
            .order_by()
            .values_list("at", flat=True)
            .distinct()
        )
        surplus = surplus_instants(sorted(instants), tier.bucket)
        for index in range(0, len(surplus), batch):
            _timed_delete(report, model, at__in=surplus[index : index + batch])


def _delete_older(
    report: PruneReport,
    model: type[Model],
    time_field: str,
    cutoff: datetime,
    batch: int,
    **more: object,
) -> None:
    """Delete rows whose ``time_field`` is before ``cutoff``, ``batch`` at a time."""
    manager = model._default_manager
    while True:
        ids = list(
            manager.filter(**{f"{time_field}__lt": cutoff}, **more).values_list("pk", flat=True)[
                :batch
            ]
        )
        if not ids:
            return
        _timed_delete(report, model, pk__in=ids)


def prune_history(now: datetime | None = None, batch: int = 2000) -> PruneReport:
    """Thin the snapshots and drop what has outlived its retention. Safe to run
    again at any time, and alongside sync (it never touches the newest stretch)."""
    now = now or timezone.now()
    report = PruneReport()
    for tier in tiers(now):
        for model in SNAPSHOTS:
            thin_snapshots(model, tier, report, batch)
    workloads = now - timedelta(days=settings.BERTH_WORKLOAD_RETENTION_DAYS)
    # Their events and forecasts go with them (CASCADE); jobs keep their figures.
    _delete_older(report, WorkloadRecord, "synced_at", workloads, batch, state__in=ENDED)
    rollups = now - timedelta(days=settings.BERTH_ROLLUP_RETENTION_DAYS)
    for model in ROLLUPS:
        _delete_older(report, model, "hour", rollups, batch)
    # A run that found drift stays: its drift records are what
    # berth_reconcile_drift_total counts, and a counter must not go down.
    reconcile = now - timedelta(days=settings.BERTH_RECONCILE_RETENTION_DAYS)
    _delete_older(report, ReconcileRun, "started_at", reconcile, batch, drift__isnull=True)
    return report
