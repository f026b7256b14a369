"""Showback's rollups as sync fills them, on the simulated cluster and on a
real kube-apiserver (tests/showback/scenario.py): GPU-seconds from each quota
reservation to its end, cut where a month begins and where the price
changes; preemptions with what they had run; borrowing by team and month;
once however often the same state is synced or the same instant snapshotted."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from cluster.models import (
    OpenAllocation,
    PreemptionLoss,
    TeamBorrowingRollup,
    TeamBorrowingTotal,
    UsageRollup,
)
from cluster.snapshots import snapshot_queues
from cluster.sync import sync_workloads
from tests.reconcile.clusters import ClusterUnderTest, SimulatedCluster
from tests.reconcile.conftest import cluster
from tests.showback import scenario
from tests.showback.scenario import admitted, at, finished, workload

__all__ = ["cluster"]


@pytest.fixture
def recorded(org: Any, cluster: ClusterUnderTest, settings: Any) -> ClusterUnderTest:
    settings.BERTH_SYNC_INTERVAL = 1800
    settings.BERTH_CLUSTER = "simulated"
    settings.BERTH_PROMETHEUS_URL = ""
    scenario.build(cluster)
    return cluster


def usage() -> dict[tuple[Any, ...], float]:
    return {
        (r.month.isoformat(), r.team, r.queue_class, r.flavor, r.price): round(
            r.gpu_seconds / 3600, 4
        )
        for r in UsageRollup.objects.all()
    }


def test_sync_fills_the_monthly_usage_at_the_price_in_force(recorded: ClusterUnderTest) -> None:
    assert usage() == {
        # A: reserved 09:30, admitted 10:00, finished 12:30; 8 GPUs.
        ("2026-10-01", "research", "training-large", "h100", "2.49"): 24.0,
        # B: 3 h 40 min, preempted, then 1 h; 4 GPUs.
        ("2026-10-01", "research", "eval-batch", "h100-spot", "0.8725"): 18.6667,
        # C: 16 GPUs, 2 h before the price change at noon and 2 h after.
        ("2026-10-01", "serving", "training-large", "h100", "2.49"): 32.0,
        ("2026-10-01", "serving", "training-large", "h100", "3.00"): 32.0,
        # D: 09:00 to 11:00, 4 GPUs, after the change.
        ("2026-10-01", "research", "training-large", "h100", "3.00"): 8.0,
    }
    assert not OpenAllocation.objects.exists()  # every one ended and counted
    [loss] = PreemptionLoss.objects.all()
    assert (loss.team, loss.queue_class, loss.flavor, loss.price, loss.gpus) == (
        "research",
        "eval-batch",
        "h100-spot",
        "0.8725",
        4,
    )
    assert loss.seconds == 3 * 3600 + 40 * 60  # since its admission
    assert (loss.namespace, loss.job_kind, loss.job_name) == ("research", "Job", "eval-b")
    [borrowing] = TeamBorrowingRollup.objects.all()
    assert (borrowing.month, borrowing.borrower, borrowing.lender, borrowing.flavor) == (
        date(2026, 10, 1),
        "research",
        "serving",
        "h100",
    )
    assert borrowing.gpu_seconds == 3 * 4 * 1800
    totals = {
        (t.team, t.flavor): (t.borrowed_gpu_seconds, t.lent_gpu_seconds)
        for t in TeamBorrowingTotal.objects.all()
    }
    assert totals == {("research", "h100"): (21600, 0), ("serving", "h100"): (0, 21600)}


def recorded_figures() -> tuple[Any, ...]:
    return (
        usage(),
        PreemptionLoss.objects.count(),
        TeamBorrowingRollup.objects.get().gpu_seconds,
        sorted(TeamBorrowingTotal.objects.values_list("borrowed_gpu_seconds", "lent_gpu_seconds")),
    )


def test_the_same_state_again_and_the_same_instant_again_add_nothing(
    recorded: ClusterUnderTest,
) -> None:
    before = recorded_figures()
    sync_workloads(recorded.backend)
    snapshot_queues(recorded.backend, at("10-20T11:00"))
    assert recorded_figures() == before


def test_running_time_is_counted_at_each_snapshot_and_an_end_seen_late_is_corrected(
    org: Any, settings: Any
) -> None:
    settings.BERTH_SYNC_INTERVAL = 1800
    cluster = SimulatedCluster()
    scenario.prices()
    cluster.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    cluster.add_foreign(scenario.cluster_queue("research"))
    cluster.set_status("ClusterQueue", "research", scenario.queue_status(8, 0))
    cluster.add_foreign(workload("research", "night", "research", 1, 8))
    status = admitted("research", "h100", 1, "09-30T22:00", "09-30T22:00")
    cluster.set_status("Workload", "job-night", status, namespace="research")
    sync_workloads(cluster.backend)
    snapshot_queues(cluster.backend, at("09-30T23:00"))
    assert usage() == {("2026-09-01", "research", "training-large", "h100", "2.49"): 8.0}
    # Into October: the new month has its own row.
    snapshot_queues(cluster.backend, at("10-01T01:00"))
    assert usage() == {
        ("2026-09-01", "research", "training-large", "h100", "2.49"): 16.0,
        ("2026-10-01", "research", "training-large", "h100", "2.49"): 8.0,
    }
    # It had finished at 00:30, which sync learns only now: the half hour
    # counted past its end is taken back.
    cluster.set_status(
        "Workload", "job-night", finished(status, "10-01T00:30"), namespace="research"
    )
    sync_workloads(cluster.backend)
    snapshot_queues(cluster.backend, at("10-01T01:30"))
    assert usage() == {
        ("2026-09-01", "research", "training-large", "h100", "2.49"): 16.0,
        ("2026-10-01", "research", "training-large", "h100", "2.49"): 4.0,
    }
    assert not OpenAllocation.objects.exists()


def test_a_flavor_without_a_price_is_counted_unpriced(org: Any, settings: Any) -> None:
    cluster = SimulatedCluster()
    cluster.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    cluster.add_foreign(scenario.cluster_queue("research"))
    cluster.add_foreign(workload("research", "free", "research", 1, 2))
    status = admitted("research", "h100", 1, "10-05T10:00", "10-05T10:00")
    cluster.set_status(
        "Workload", "job-free", finished(status, "10-05T11:00"), namespace="research"
    )
    sync_workloads(cluster.backend)
    snapshot_queues(cluster.backend, at("10-05T12:00"))
    assert usage() == {("2026-10-01", "research", "training-large", "h100", ""): 2.0}
