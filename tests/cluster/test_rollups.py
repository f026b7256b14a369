"""Hourly rollups written by sync: admissions with their wait histogram, and
preemptions by reason; counted once however often the same state is synced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cluster.models import WAIT_BUCKETS, PreemptionRollup, WaitRollup
from cluster.rollups import bucket_of
from cluster.sync import sync_workloads
from tests.cluster.test_sync import ADMITTED, KUEUE, T1, T2, condition, record, research, workload
from tests.reconcile.clusters import ClusterUnderTest

__all__ = ["research"]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_an_admission_is_counted_once_with_its_wait(research: ClusterUnderTest) -> None:
    research.add_foreign(workload("job-train"))
    research.set_status("Workload", "job-train", ADMITTED, namespace="research")
    sync_workloads(research.backend)
    sync_workloads(research.backend)  # the same state again
    [row] = WaitRollup.objects.all()
    created = record("job-train").created_at
    wait = (at(T1) - created).total_seconds()
    assert (row.cluster_queue, row.admissions, row.gpus_admitted) == ("research", 1, 8)
    assert row.hour == at(T1).replace(minute=0, second=0)
    assert abs(row.wait_seconds_sum - wait) < 1
    assert row.buckets[bucket_of(wait)] == 1 and sum(row.buckets) == 1


def test_a_preemption_is_counted_by_reason_and_the_readmission_waits_from_the_requeue(
    research: ClusterUnderTest,
) -> None:
    research.add_foreign(workload("job-long"))
    research.set_status("Workload", "job-long", ADMITTED, namespace="research")
    sync_workloads(research.backend)
    evicted = {
        "admission": None,
        "conditions": [
            condition("QuotaReserved", False, "Pending", T2),
            condition("Admitted", False, "NoReservation", T2),
            condition("Evicted", True, "Preempted", T2),
            condition("Preempted", True, "InClusterQueue", T2),
            condition("Requeued", True, "Preempted", T2),
        ],
    }
    research.set_status("Workload", "job-long", evicted, namespace="research")
    sync_workloads(research.backend)
    sync_workloads(research.backend)
    [row] = PreemptionRollup.objects.all()
    assert (row.cluster_queue, row.reason, row.preempted, row.count) == (
        "research",
        "InClusterQueue",
        True,
        1,
    )
    # 8 GPUs interrupted after running from T1 to T2.
    assert row.gpu_seconds_interrupted == 8 * (at(T2) - at(T1)).total_seconds()
    assert record("job-long").cluster_queue == "research"  # kept while pending again

    T3 = (at(T2) + timedelta(seconds=45)).strftime("%Y-%m-%dT%H:%M:%SZ")
    readmitted = {
        **ADMITTED,
        "conditions": [
            condition("Evicted", False, "Preempted", T3),
            condition("Requeued", True, "Preempted", T2),
            condition("QuotaReserved", True, "QuotaReserved", T3),
            condition("Admitted", True, "Admitted", T3),
        ],
    }
    research.set_status("Workload", "job-long", readmitted, namespace="research")
    sync_workloads(research.backend)
    total = sum(r.admissions for r in WaitRollup.objects.all())
    assert total == 2
    buckets = [0] * len(WAIT_BUCKETS)
    for r in WaitRollup.objects.all():
        buckets = [a + b for a, b in zip(buckets, r.buckets, strict=True)]
    assert buckets[bucket_of(45)] >= 1  # the second wait counts from the requeue


def test_borrowing_is_attributed_to_lenders_and_shares_recorded_once_per_instant(
    research: ClusterUnderTest, settings: Any
) -> None:
    from cluster.models import BorrowingRollup, FairShareRollup
    from cluster.snapshots import snapshot_queues

    settings.BERTH_SYNC_INTERVAL = 30

    def queue(name: str, total: str, borrowed: str) -> None:
        research.add_foreign(
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "cohortName": "org",
                    "namespaceSelector": {},
                    "fairSharing": {"weight": "2" if name == "research" else "1"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        reservation = [
            {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": total,
                                             "borrowed": borrowed}]}
        ]  # fmt: skip
        research.set_status("ClusterQueue", name, {"flavorsReservation": reservation})

    queue("research", "12", "4")
    queue("serving", "2", "0")
    # Both instants in one hourly rollup, whatever the clock says when the test runs.
    t0 = (datetime.now(UTC) - timedelta(hours=1)).replace(minute=10, second=0, microsecond=0)
    snapshot_queues(research.backend, t0)
    snapshot_queues(research.backend, t0)  # the same instant again: nothing added
    [pair] = BorrowingRollup.objects.all()
    assert (pair.borrower, pair.lender, pair.flavor) == ("research", "serving", "h100")
    assert pair.gpu_seconds == 4 * 30  # one interval for the first snapshot
    snapshot_queues(research.backend, t0 + timedelta(seconds=20))
    pair.refresh_from_db()
    assert pair.gpu_seconds == 4 * 30 + 4 * 20
    share = FairShareRollup.objects.get(cluster_queue="research")
    # 4 borrowed of the tree's 16 nominal GPUs, weight 2: 0.125, twice.
    assert (share.samples, round(share.share_sum, 6)) == (2, 0.25)
    assert FairShareRollup.objects.get(cluster_queue="serving").share_sum == 0
