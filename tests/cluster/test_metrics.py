"""GET /metrics, what it reads: the Prometheus exposition of what Postgres
holds (queue status, the newest quota and capacity snapshots in base units,
the hourly wait and preemption rollups, jobs by state, reconcile and sync
health), every family with HELP and TYPE in a sorted place, identical on a
second scrape, complete on an empty database; and its cost does not grow with
the number of queues. The format is in ``test_metrics_format.py``, who may
read it in ``test_metrics_access.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cluster.models import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    CapacitySnapshot,
    PreemptionRollup,
    QueueSnapshot,
    QueueStatus,
    WaitRollup,
    WorkloadRecord,
)
from jobs.models import JobRequest, JobState
from queues.models import DriftRecord, PolicyChange, ReconcileRun
from tests.cluster.metrics_support import ODD_REASON, URL, one, parse, scrape, values
from tests.jobs.conftest import Org, job

GPU = "nvidia.com/gpu"
OLD = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
NEW = OLD + timedelta(seconds=30)
HOUR_1 = datetime(2026, 12, 1, 8, tzinfo=UTC)
HOUR_2 = HOUR_1 + timedelta(hours=1)


def snapshot(at: datetime, queue: str, flavor: str, resource: str, **figures: int) -> None:
    QueueSnapshot.objects.create(
        at=at, cluster_queue=queue, flavor=flavor, resource=resource, **figures
    )


def buckets(**counts: int) -> dict[str, int]:
    """WaitRollup bucket columns by index: buckets(b0=1, b12=2)."""
    return {BUCKET_FIELDS[int(key[1:])]: count for key, count in counts.items()}


@pytest.fixture
def seeded(org: Org) -> dict[str, Any]:
    for name, pending, reserving, admitted in (("research", 3, 2, 1), ("serving", 0, 1, 1)):
        QueueStatus.objects.create(
            kind="ClusterQueue",
            name=name,
            cluster_queue=name,
            pending_workloads=pending,
            reserving_workloads=reserving,
            admitted_workloads=admitted,
            status={"pendingWorkloads": pending, "reservingWorkloads": reserving},
            observed_at=NEW,
        )
    QueueStatus.objects.create(  # a LocalQueue's status is not a ClusterQueue's
        kind="LocalQueue",
        namespace="research",
        name="research",
        cluster_queue="research",
        pending_workloads=3,
        observed_at=NEW,
    )

    snapshot(OLD, "research", "h100", GPU, nominal=16, usage=2)  # superseded
    snapshot(NEW, "research", "h100", GPU, nominal=16, usage=20, borrowed=4)
    snapshot(NEW, "research", "h100", "cpu", nominal=64000, usage=1500, lent=250)
    snapshot(NEW, "research", "h100", "memory", nominal=2**40, usage=3 * 2**30)
    snapshot(NEW, "serving", "h100", GPU, nominal=16, usage=8, lent=4)

    CapacitySnapshot.objects.create(at=OLD, flavor="h100", resource=GPU, allocatable=8, nodes=1)
    for flavor, resource, amount, nodes in (
        ("h100", GPU, 32, 4),
        ("h100", "cpu", 768000, 4),
        ("h100-spot", GPU, 16, 2),
    ):
        CapacitySnapshot.objects.create(
            at=NEW, flavor=flavor, resource=resource, allocatable=amount, nodes=nodes
        )

    WaitRollup.objects.create(
        cluster_queue="research",
        hour=HOUR_1,
        admissions=3,
        wait_seconds_sum=100.0,
        **buckets(b0=1, b1=2),
    )
    WaitRollup.objects.create(
        cluster_queue="research",
        hour=HOUR_2,
        admissions=2,
        wait_seconds_sum=4000.5,
        **buckets(b1=1, b12=1),
    )
    WaitRollup.objects.create(
        cluster_queue="serving",
        hour=HOUR_1,
        admissions=1,
        wait_seconds_sum=5.0,
        **buckets(b0=1),
    )

    for queue, hour, reason, preempted, count, gpu_seconds in (
        ("research", HOUR_1, "InClusterQueue", True, 2, 7200.0),
        ("research", HOUR_2, "InClusterQueue", True, 1, 3600.0),
        ("research", HOUR_2, ODD_REASON, True, 1, 100.0),
        ("research", HOUR_1, "PodsReadyTimeout", False, 4, 50.0),
        ("serving", HOUR_1, "InCohortReclamation", True, 1, 0.0),
    ):
        PreemptionRollup.objects.create(
            cluster_queue=queue,
            hour=hour,
            reason=reason,
            preempted=preempted,
            count=count,
            gpu_seconds_interrupted=gpu_seconds,
        )

    for name in ("sft-a", "sft-b", "sft-c"):
        response = org.alice.post("/api/v1/jobs/", job(name=name), format="json")
        assert response.status_code == 201, response.content
    JobRequest.objects.filter(name="sft-a").update(state=JobState.RUNNING)
    JobRequest.objects.filter(name="sft-b").update(state=JobState.PREEMPTED)

    applied = ReconcileRun.objects.create(
        trigger="periodic", backend="simulated", status="succeeded", policy_version=7
    )
    failed = ReconcileRun.objects.create(
        trigger="periodic",
        backend="simulated",
        status="failed",
        policy_version=9,
        errors=[{"object": "ClusterQueue/a"}, {"object": "ClusterQueue/b"}],
    )
    plan = ReconcileRun.objects.create(  # newer, but dry runs and skips do not count
        trigger="plan", backend="simulated", status="succeeded", dry_run=True, policy_version=9
    )
    skipped = ReconcileRun.objects.create(trigger="periodic", backend="simulated", status="skipped")
    times = {
        applied: (OLD, OLD + timedelta(seconds=5)),
        failed: (NEW, NEW + timedelta(seconds=2)),
        plan: (NEW + timedelta(seconds=10), NEW + timedelta(seconds=11)),
        skipped: (NEW + timedelta(seconds=20), NEW + timedelta(seconds=20)),
    }
    for run_row, (started, finished) in times.items():
        ReconcileRun.objects.filter(pk=run_row.pk).update(started_at=started, finished_at=finished)
    for name in ("a", "b"):
        DriftRecord.objects.create(run=applied, kind="ClusterQueue", name=name, fields=["spec"])

    record = WorkloadRecord.objects.create(
        uid="uid-1", namespace="research", name="wl", created_at=OLD
    )
    WorkloadRecord.objects.filter(pk=record.pk).update(synced_at=NEW + timedelta(seconds=1))
    return {"policy_version": PolicyChange.objects.latest("id").id}


EXPECTED_FAMILIES = {
    "berth_pending_workloads": "gauge",
    "berth_reserving_active_workloads": "gauge",
    "berth_admitted_active_workloads": "gauge",
    "berth_cluster_queue_resource_reservation": "gauge",
    "berth_cluster_queue_nominal_quota": "gauge",
    "berth_cluster_queue_borrowing": "gauge",
    "berth_cluster_queue_lent": "gauge",
    "berth_admission_wait_time_seconds": "histogram",
    "berth_preempted_workloads_total": "counter",
    "berth_evicted_workloads_total": "counter",
    "berth_preempted_gpu_seconds_total": "counter",
    "berth_node_allocatable": "gauge",
    "berth_nodes": "gauge",
    "berth_jobs": "gauge",
    "berth_reconcile_last_run_timestamp_seconds": "gauge",
    "berth_reconcile_last_success_timestamp_seconds": "gauge",
    "berth_reconcile_last_status": "gauge",
    "berth_reconcile_errors": "gauge",
    "berth_reconcile_drift_total": "counter",
    "berth_policy_version": "gauge",
    "berth_applied_policy_version": "gauge",
    "berth_sync_last_snapshot_timestamp_seconds": "gauge",
    "berth_sync_workloads_last_seen_timestamp_seconds": "gauge",
    "berth_sync_step_up": "gauge",
    "berth_sync_step_last_run_timestamp_seconds": "gauge",
    "berth_sync_step_last_success_timestamp_seconds": "gauge",
    "berth_sync_step_consecutive_failures": "gauge",
    "berth_sync_step_failures_total": "counter",
    "berth_sync_step_last_duration_seconds": "gauge",
    "berth_approval_requests": "gauge",
    "berth_approval_oldest_pending_seconds": "gauge",
    "berth_approval_undelivered_decisions": "gauge",
    "berth_team_fair_share_ratio": "gauge",
    "berth_team_fair_share_starved_below": "gauge",
    "berth_team_fair_share_received_gpu_hours": "gauge",
    "berth_team_fair_share_deserved_gpu_hours": "gauge",
    "berth_team_waiting_gpus": "gauge",
    "berth_team_fair_share_starved": "gauge",
    "berth_fair_share_evaluated_timestamp_seconds": "gauge",
}


def test_every_family_has_help_and_type_and_a_sorted_place(
    seeded: dict[str, Any], client: Client
) -> None:
    text = client.get(URL).content.decode()
    families = parse(text)
    assert {name: f.type for name, f in families.items()} == EXPECTED_FAMILIES
    assert all(f.help for f in families.values())
    assert list(families) == sorted(families)


def test_queue_status_and_quota_from_the_newest_snapshot_in_base_units(
    seeded: dict[str, Any], client: Client
) -> None:
    families = scrape(client)
    assert values(families, "berth_pending_workloads") == {
        (("cluster_queue", "research"),): 3,
        (("cluster_queue", "serving"),): 0,
    }
    assert one(families, "berth_reserving_active_workloads", cluster_queue="research") == 2
    assert one(families, "berth_admitted_active_workloads", cluster_queue="serving") == 1

    def quota(name: str) -> dict[tuple[str, str, str], float]:
        return {
            (labels["cluster_queue"], labels["flavor"], labels["resource"]): value
            for _, labels, value in families[name].samples
        }

    assert quota("berth_cluster_queue_nominal_quota") == {
        ("research", "h100", GPU): 16,
        ("research", "h100", "cpu"): 64,  # cores, from 64000 milli-CPU
        ("research", "h100", "memory"): 2**40,  # bytes
        ("serving", "h100", GPU): 16,
    }
    assert quota("berth_cluster_queue_resource_reservation") == {
        ("research", "h100", GPU): 20,  # the newest snapshot, not the older 2
        ("research", "h100", "cpu"): 1.5,
        ("research", "h100", "memory"): 3 * 2**30,
        ("serving", "h100", GPU): 8,
    }
    assert quota("berth_cluster_queue_borrowing")[("research", "h100", GPU)] == 4
    assert quota("berth_cluster_queue_lent")[("research", "h100", "cpu")] == 0.25
    assert quota("berth_cluster_queue_lent")[("serving", "h100", GPU)] == 4
    assert 'resource="cpu"} 1.5\n' in client.get(URL).content.decode()


def test_wait_histogram_sums_every_hour_cumulatively(
    seeded: dict[str, Any], client: Client
) -> None:
    families = scrape(client)
    name = "berth_admission_wait_time_seconds"
    research = {
        labels["le"]: value
        for sample, labels, value in families[name].samples
        if sample == f"{name}_bucket" and labels["cluster_queue"] == "research"
    }
    assert list(research) == [*(repr(float(b)) for b in WAIT_BUCKETS[:-1]), "+Inf"]
    counts = list(research.values())
    assert counts == sorted(counts)  # monotone
    # hour 1: one ≤10 s, two ≤30 s; hour 2: one ≤30 s, one beyond 3 days.
    assert research["10.0"] == 1 and research["30.0"] == 4 and research["259200.0"] == 4
    assert research["+Inf"] == 5 == one(families, f"{name}_count", cluster_queue="research")
    assert one(families, f"{name}_sum", cluster_queue="research") == 4100.5
    assert one(families, f"{name}_count", cluster_queue="serving") == 1
    assert one(families, f"{name}_bucket", cluster_queue="serving", le="10.0") == 1


def test_preemptions_and_evictions_by_reason(seeded: dict[str, Any], client: Client) -> None:
    response = client.get(URL)
    text = response.content.decode()
    # A reason with a quote, a backslash and a newline, escaped on the wire.
    assert 'reason="Said \\"no\\" \\\\ then\\nleft"} 1.0\n' in text
    families = parse(text)
    assert values(families, "berth_preempted_workloads_total") == {
        (("cluster_queue", "research"), ("reason", "InClusterQueue")): 3,  # both hours
        (("cluster_queue", "research"), ("reason", ODD_REASON)): 1,
        (("cluster_queue", "serving"), ("reason", "InCohortReclamation")): 1,
    }
    assert values(families, "berth_evicted_workloads_total") == {
        (("cluster_queue", "research"), ("reason", "Preempted")): 4,
        (("cluster_queue", "research"), ("reason", "PodsReadyTimeout")): 4,
        (("cluster_queue", "serving"), ("reason", "Preempted")): 1,
    }
    assert values(families, "berth_preempted_gpu_seconds_total") == {
        (("cluster_queue", "research"),): 10900.0,  # not the 50 of the timeout eviction
        (("cluster_queue", "serving"),): 0.0,
    }


def test_capacity_jobs_reconcile_and_sync(seeded: dict[str, Any], client: Client) -> None:
    families = scrape(client)
    assert values(families, "berth_node_allocatable") == {
        (("flavor", "h100"), ("resource", GPU)): 32,
        (("flavor", "h100"), ("resource", "cpu")): 768,
        (("flavor", "h100-spot"), ("resource", GPU)): 16,
    }
    assert values(families, "berth_nodes") == {
        (("flavor", "h100"),): 4,
        (("flavor", "h100-spot"),): 2,
    }

    jobs = {labels["state"]: value for _, labels, value in families["berth_jobs"].samples}
    assert set(jobs) == {state.value for state in JobState}
    assert {s: n for s, n in jobs.items() if n} == {"submitted": 1, "running": 1, "preempted": 1}

    assert one(families, "berth_reconcile_last_run_timestamp_seconds") == NEW.timestamp()
    assert (
        one(families, "berth_reconcile_last_success_timestamp_seconds")
        == (OLD + timedelta(seconds=5)).timestamp()
    )
    assert {
        labels["status"]: value
        for _, labels, value in families["berth_reconcile_last_status"].samples
    } == {"running": 0, "succeeded": 0, "partial": 0, "failed": 1}
    assert one(families, "berth_reconcile_errors") == 2
    assert one(families, "berth_reconcile_drift_total") == 2
    assert one(families, "berth_policy_version") == seeded["policy_version"]
    assert one(families, "berth_applied_policy_version") == 7
    assert one(families, "berth_sync_last_snapshot_timestamp_seconds") == NEW.timestamp()
    assert (
        one(families, "berth_sync_workloads_last_seen_timestamp_seconds")
        == (NEW + timedelta(seconds=1)).timestamp()
    )


def test_two_scrapes_are_identical(seeded: dict[str, Any], client: Client) -> None:
    first, second = client.get(URL), client.get(URL)
    assert first.content == second.content
    assert first["Cache-Control"] == "no-store"


def test_an_empty_database_lists_every_family_without_inventing_samples(
    db: Any, client: Client
) -> None:
    families = scrape(client)
    assert set(families) == set(EXPECTED_FAMILIES)
    assert families["berth_pending_workloads"].samples == []
    assert families["berth_reconcile_last_run_timestamp_seconds"].samples == []
    assert one(families, "berth_applied_policy_version") == -1
    assert one(families, "berth_jobs", state="running") == 0


# ---------------------------------------------------------------------------
# Cost
# ---------------------------------------------------------------------------


def seed_queues(names: list[str]) -> None:
    for index, name in enumerate(names):
        QueueStatus.objects.create(
            kind="ClusterQueue",
            name=name,
            cluster_queue=name,
            pending_workloads=index,
            observed_at=NEW,
        )
        for resource in (GPU, "cpu"):
            snapshot(NEW, name, "h100", resource, nominal=8, usage=index)
        for hour in (HOUR_1, HOUR_2):
            WaitRollup.objects.create(
                cluster_queue=name,
                hour=hour,
                admissions=1,
                wait_seconds_sum=1.0,
                **buckets(b0=1),
            )
            PreemptionRollup.objects.create(
                cluster_queue=name, hour=hour, reason="InClusterQueue", count=1
            )
            PreemptionRollup.objects.create(
                cluster_queue=name, hour=hour, reason="PodsReadyTimeout", preempted=False, count=1
            )


def test_queries_do_not_grow_with_the_number_of_queues(db: Any, client: Client) -> None:
    CapacitySnapshot.objects.create(at=NEW, flavor="h100", resource=GPU, allocatable=8, nodes=1)
    ReconcileRun.objects.create(trigger="periodic", backend="simulated", status="succeeded")

    def measure() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            families = scrape(client)
        return len(queries), len(families["berth_pending_workloads"].samples)

    seed_queues([f"q-{i:02d}" for i in range(3)])
    scrape(client)  # the job counts are built once, then read while no job changes
    few, seen_few = measure()
    seed_queues([f"q-{i:02d}" for i in range(3, 30)])
    many, seen_many = measure()
    assert (seen_few, seen_many) == (3, 30)
    assert few == many, (few, many)
    assert many <= 18  # one of them reads the sync steps' health, one the fair shares
