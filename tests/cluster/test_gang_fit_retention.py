"""Gang-fit snapshots are thinned as they age like the other snapshots
(cluster.retention): every one of the newest hour, one per five minutes, per
hour, per day; a second prune deletes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cluster.models import GangFitSnapshot
from cluster.retention import prune_history

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def snapshots(start: datetime, minutes: float, every: int = 30) -> None:
    at = start
    while at < start + timedelta(minutes=minutes):
        for flavor in ("h100", "a100"):
            GangFitSnapshot.objects.create(
                at=at,
                flavor=flavor,
                nodes=8,
                gpus=64,
                free_gpus=20,
                whole_free_nodes=1,
                stranded_gpus=12,
            )
        at += timedelta(seconds=every)


def kept(start: datetime, minutes: float) -> int:
    rows = GangFitSnapshot.objects.filter(at__gte=start, at__lt=start + timedelta(minutes=minutes))
    instants = rows.order_by().values("at").distinct().count()
    assert rows.count() == 2 * instants  # an instant is kept or dropped whole
    return instants


@pytest.mark.django_db
def test_gang_fit_snapshots_are_thinned_as_they_age() -> None:
    newest = NOW - timedelta(minutes=30)
    five = NOW - timedelta(hours=10)
    hourly = (NOW - timedelta(days=10)).replace(minute=0)
    daily = (NOW - timedelta(days=200)).replace(hour=0, minute=0)
    snapshots(newest, 30)
    snapshots(five, 120)
    snapshots(hourly, 180)
    snapshots(daily, 2 * 24 * 60, every=300)

    report = prune_history(now=NOW)

    assert (kept(newest, 30), kept(five, 120), kept(hourly, 180)) == (60, 24, 3)
    assert kept(daily, 2 * 24 * 60) == 2
    assert report.deleted["cluster_gangfitsnapshot"] == 2 * (240 - 24 + 360 - 3 + 576 - 2)
    assert prune_history(now=NOW).deleted == {}
