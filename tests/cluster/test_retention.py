"""Recorded history stays within its retention (cluster.retention): snapshots
thinned as they age (all of the newest hour, one per five minutes to 48 h, one
per hour to 90 days, one per day after), ended workloads dropped with their
events after 90 days while their jobs stay, rollups after 400 days, reconcile
runs after 90 days unless they found drift. A second prune deletes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cluster.models import (
    CapacitySnapshot,
    QueueSnapshot,
    WaitRollup,
    WorkloadEvent,
    WorkloadRecord,
    WorkloadState,
)
from cluster.retention import prune_history, surplus_instants
from cluster.tasks import prune_history as prune_task
from queues.models import DriftRecord, ReconcileRun
from tests.jobs.conftest import org

__all__ = ["org"]  # the fixture, used by name

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def snapshots(start: datetime, minutes: float, every: int = 30) -> None:
    """Sync's snapshots every ``every`` seconds: two queues' rows and one
    capacity row at each instant."""
    at = start
    while at < start + timedelta(minutes=minutes):
        for queue in ("research", "serving"):
            QueueSnapshot.objects.create(at=at, cluster_queue=queue, flavor="h100", resource="gpu")
        CapacitySnapshot.objects.create(
            at=at, flavor="h100", resource="gpu", allocatable=64, nodes=8
        )
        at += timedelta(seconds=every)


def kept(start: datetime, minutes: float) -> int:
    """Instants kept in the stretch (each holds both queues' rows)."""
    end = start + timedelta(minutes=minutes)
    rows = QueueSnapshot.objects.filter(at__gte=start, at__lt=end)
    instants = rows.order_by().values("at").distinct().count()
    assert rows.count() == 2 * instants  # an instant is kept or dropped whole
    return instants


def test_the_first_instant_of_each_bucket_is_kept() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    instants = [base + timedelta(seconds=s) for s in (0, 30, 299, 300, 330, 900)]
    assert surplus_instants(instants, 300) == instants[1:3] + instants[4:5]


@pytest.mark.django_db
def test_snapshots_are_thinned_as_they_age() -> None:
    newest = NOW - timedelta(minutes=30)
    five = NOW - timedelta(hours=10)  # in the five-minute tier
    hourly = (NOW - timedelta(days=10)).replace(minute=0)  # in the hourly tier
    daily = (NOW - timedelta(days=200)).replace(hour=0, minute=0)  # one per day
    snapshots(newest, 30)
    snapshots(five, 120)
    snapshots(hourly, 180)
    snapshots(daily, 2 * 24 * 60, every=300)

    report = prune_history(now=NOW)

    assert kept(newest, 30) == 60  # every one of the newest hour
    assert kept(five, 120) == 24  # one per five minutes
    assert kept(hourly, 180) == 3  # one per hour
    assert kept(daily, 2 * 24 * 60) == 2  # one per day
    # Capacity snapshots are thinned the same way.
    assert CapacitySnapshot.objects.count() == QueueSnapshot.objects.count() / 2 == 60 + 24 + 3 + 2
    assert report.deleted["jobs_queuesnapshot"] == 2 * (240 - 24 + 360 - 3 + 576 - 2)
    # Again: the same instants stay, nothing more is deleted.
    assert prune_history(now=NOW).deleted == {}


def workload(uid: str, state: str, seen: datetime) -> WorkloadRecord:
    record = WorkloadRecord.objects.create(
        uid=uid, namespace="research", name=uid, created_at=seen, state=state
    )
    WorkloadEvent.objects.create(workload=record, type="Created", at=seen)
    WorkloadRecord.objects.filter(pk=record.pk).update(synced_at=seen)  # auto_now otherwise
    return record


@pytest.mark.django_db
def test_ended_workloads_go_after_their_retention_with_their_events() -> None:
    old = NOW - timedelta(days=91)
    workload("old-finished", WorkloadState.FINISHED, old)
    workload("old-deleted", WorkloadState.DELETED, old)
    workload("old-running", WorkloadState.ADMITTED, old)  # live: never pruned
    workload("new-finished", WorkloadState.FINISHED, NOW - timedelta(days=89))

    prune_history(now=NOW)

    assert set(WorkloadRecord.objects.values_list("uid", flat=True)) == {
        "old-running",
        "new-finished",
    }
    assert WorkloadEvent.objects.count() == 2


@pytest.mark.django_db
def test_a_jobs_record_stays_when_its_workload_goes(org: Any) -> None:
    from jobs.models import JobRequest
    from queues.models import Team

    record = workload("done", WorkloadState.FINISHED, NOW - timedelta(days=91))
    job = JobRequest.objects.create(
        name="a", team=Team.objects.get(slug="research"), namespace="research", image="busybox",
        local_queue="research", cluster_queue="research", submitted_at=NOW, workload=record,
        gpu_seconds_used=7200,
    )  # fmt: skip
    prune_history(now=NOW)
    job.refresh_from_db()
    assert job.workload is None and job.gpu_seconds_used == 7200


@pytest.mark.django_db
def test_old_rollups_and_reconcile_runs_go_but_runs_that_found_drift_stay() -> None:
    WaitRollup.objects.create(cluster_queue="research", hour=NOW - timedelta(days=401))
    WaitRollup.objects.create(cluster_queue="research", hour=NOW - timedelta(days=399))
    plain, drifted, recent = (ReconcileRun.objects.create() for _ in range(3))
    DriftRecord.objects.create(run=drifted, kind="ClusterQueue", name="research")
    ReconcileRun.objects.filter(pk__in=[plain.pk, drifted.pk]).update(
        started_at=NOW - timedelta(days=91)
    )

    prune_history(now=NOW)

    assert WaitRollup.objects.count() == 1
    assert set(ReconcileRun.objects.values_list("pk", flat=True)) == {drifted.pk, recent.pk}
    assert DriftRecord.objects.count() == 1


@pytest.mark.django_db
def test_the_beat_task_prunes_and_says_what_it_deleted() -> None:
    snapshots(NOW - timedelta(days=10), 60)
    result = prune_task.apply().get()
    assert result["deleted"]["jobs_queuesnapshot"] == 2 * 119
    assert result["longest_statement"] >= 0
