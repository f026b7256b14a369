"""The cluster app's figures for ``/metrics``: Kueue's queue status as sync
mirrored it, quota and usage from the newest snapshots, admission waits and
evictions from the hourly rollups, node capacity, and how sync is keeping up.

Everything comes from Postgres (never from the cluster), and only from the
small or pre-aggregated tables sync keeps. No event-log scans, and the number
of queries does not grow with the number of queues.

Names mirror Kueue's metrics where they mean the same (``kueue_x`` →
``berth_x``), so a dashboard built on Kueue's metrics ports by renaming. Where
what Berth stores differs from what Kueue reports, the name says what it is.
``prometheus_client`` writes them; ``controlplane.metrics`` serves them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import Max, Subquery, Sum

from cluster import stats
from cluster.models import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    CapacitySnapshot,
    PreemptionRollup,
    QueueSnapshot,
    QueueStatus,
    SyncStepHealth,
    SyncStepName,
    WaitRollup,
    WorkloadRecord,
)
from queues.metric_families import Family, counter, gauge, histogram, timestamp
from queues.quantity import Unit, unit_for


def in_base_unit(resource: str, amount: int) -> float:
    """A canonical stored amount in Prometheus' base units: CPU in cores (stored
    as milli-CPU), memory in bytes, GPUs and other counts as they are."""
    return amount / 1000 if unit_for(resource) is Unit.MILLI else amount


def queue_status_metrics() -> list[Family]:
    """From Kueue's ClusterQueue status as sync last mirrored it (1 query)."""
    pending = gauge(
        "berth_pending_workloads",
        "Workloads waiting for admission in the ClusterQueue (status.pendingWorkloads). "
        "Kueue's ClusterQueue status does not split active from inadmissible, so unlike "
        "kueue_pending_workloads there is no status label.",
    )
    reserving = gauge(
        "berth_reserving_active_workloads",
        "Workloads holding quota in the ClusterQueue, admitted or waiting for admission "
        "checks (status.reservingWorkloads).",
    )
    admitted = gauge(
        "berth_admitted_active_workloads",
        "Admitted workloads of the ClusterQueue that have not finished (status.admittedWorkloads).",
    )
    rows = QueueStatus.objects.filter(kind="ClusterQueue").values_list(
        "name", "pending_workloads", "reserving_workloads", "admitted_workloads"
    )
    for name, pending_count, reserving_count, admitted_count in rows:
        labels = {"cluster_queue": name}
        pending.add(pending_count, labels)
        reserving.add(reserving_count, labels)
        admitted.add(admitted_count, labels)
    return [pending, reserving, admitted]


def quota_metrics(newest: datetime | None) -> list[Family]:
    """Per ClusterQueue × flavor × resource from the newest queue snapshot (1
    query). Sync snapshots every queue at the same instant, so the newest
    snapshot is every live queue's newest, and a deleted queue drops out."""
    scope = " per flavor and resource, from the newest queue snapshot"
    units = " (CPU in cores, memory in bytes, GPUs and other resources as counts)."
    reservation = gauge(
        "berth_cluster_queue_resource_reservation",
        "Quota reserved by the ClusterQueue's workloads (Kueue's flavorsReservation)"
        + scope
        + units,
    )
    nominal = gauge(
        "berth_cluster_queue_nominal_quota",
        "The ClusterQueue's nominal quota" + scope + units,
    )
    borrowing = gauge(
        "berth_cluster_queue_borrowing",
        "Quota the ClusterQueue is borrowing from its cohort now (not the borrowing limit)"
        + scope
        + units,
    )
    lent = gauge(
        "berth_cluster_queue_lent",
        "Unused nominal quota of the ClusterQueue that cohort members are borrowing now "
        "(attributed by sync)" + scope + units,
    )
    if newest is not None:
        rows = QueueSnapshot.objects.filter(at=newest).values_list(
            "cluster_queue", "flavor", "resource", "nominal", "usage", "borrowed", "lent"
        )
        for queue, flavor, resource, nominal_amount, usage, borrowed, lent_amount in rows:
            labels = {"cluster_queue": queue, "flavor": flavor, "resource": resource}
            nominal.add(in_base_unit(resource, nominal_amount), labels)
            reservation.add(in_base_unit(resource, usage), labels)
            borrowing.add(in_base_unit(resource, borrowed), labels)
            lent.add(in_base_unit(resource, lent_amount), labels)
    return [reservation, nominal, borrowing, lent]


def wait_metrics() -> list[Family]:
    """The admission wait histogram per ClusterQueue, summed over every stored
    hourly rollup by the database (1 query; no rows come back per hour)."""
    waits = histogram(
        "berth_admission_wait_time_seconds",
        "Time from a workload being queued (or requeued after an eviction) to its admission. "
        "Cumulative over every stored hourly rollup, not since this process started "
        "as a Prometheus client's would be.",
    )
    per_bucket = {f"sum_{name}": Sum(name) for name in BUCKET_FIELDS}
    rows = (
        WaitRollup.objects.values("cluster_queue")
        .annotate(wait_sum=Sum("wait_seconds_sum"), **per_bucket)
        .order_by("cluster_queue")
    )
    for summed in rows:
        row: dict[str, Any] = dict(summed)  # the bucket keys are built, not literal
        counts = [int(row[f"sum_{name}"] or 0) for name in BUCKET_FIELDS]
        waits.add(
            {"cluster_queue": row["cluster_queue"]},
            WAIT_BUCKETS,
            counts,
            float(row["wait_sum"] or 0.0),
        )
    return [waits]


PREEMPTED_REASON = "Preempted"  # Kueue's eviction reason for a preemption


def eviction_metrics() -> list[Family]:
    """Preemptions and other evictions per ClusterQueue and reason, summed over
    every stored hourly rollup (1 query)."""
    preempted = counter(
        "berth_preempted_workloads_total",
        "Workloads preempted, by the preempted workload's ClusterQueue and Kueue's "
        "preemption reason (kueue_preempted_workloads_total counts by the preempting "
        "queue). Over every stored hourly rollup.",
    )
    evicted = counter(
        "berth_evicted_workloads_total",
        "Workloads evicted, by ClusterQueue and Kueue's eviction reason; preemptions count "
        'under reason="Preempted", as in kueue_evicted_workloads_total. '
        "Over every stored hourly rollup.",
    )
    gpu_seconds = counter(
        "berth_preempted_gpu_seconds_total",
        "GPU-seconds of work interrupted by preemptions (GPUs × time since admission), "
        "by the preempted workload's ClusterQueue. Over every stored hourly rollup.",
    )
    evictions: dict[tuple[str, str], int] = defaultdict(int)
    interrupted: dict[str, float] = defaultdict(float)
    rows = (
        PreemptionRollup.objects.values("cluster_queue", "reason", "preempted")
        .annotate(n=Sum("count"), gpu=Sum("gpu_seconds_interrupted"))
        .order_by()
    )
    for row in rows:
        queue, count = row["cluster_queue"], int(row["n"] or 0)
        if row["preempted"]:
            preempted.add(count, {"cluster_queue": queue, "reason": row["reason"]})
            evictions[(queue, PREEMPTED_REASON)] += count
            interrupted[queue] += float(row["gpu"] or 0.0)
        else:
            evictions[(queue, row["reason"])] += count
    for (queue, reason), count in evictions.items():
        evicted.add(count, {"cluster_queue": queue, "reason": reason})
    for queue, seconds in interrupted.items():
        gpu_seconds.add(seconds, {"cluster_queue": queue})
    return [preempted, evicted, gpu_seconds]


def capacity_metrics() -> list[Family]:
    """Node capacity per flavor from the newest capacity snapshot (1 query)."""
    allocatable = gauge(
        "berth_node_allocatable",
        "Allocatable resources of the nodes the ResourceFlavor's labels select, newest "
        "capacity snapshot (CPU in cores, memory in bytes, GPUs as counts).",
    )
    nodes = gauge(
        "berth_nodes",
        "Nodes the ResourceFlavor's labels select, newest capacity snapshot.",
    )
    newest = CapacitySnapshot.objects.order_by("-at").values("at")[:1]
    rows = CapacitySnapshot.objects.filter(at=Subquery(newest)).values_list(
        "flavor", "resource", "allocatable", "nodes"
    )
    node_counts: dict[str, int] = {}
    for flavor, resource, amount, node_count in rows:
        allocatable.add(in_base_unit(resource, amount), {"flavor": flavor, "resource": resource})
        node_counts[flavor] = node_count
    for flavor, node_count in node_counts.items():
        nodes.add(node_count, {"flavor": flavor})
    return [allocatable, nodes]


def sync_metrics(newest_snapshot: datetime | None) -> list[Family]:
    """When sync last wrote (1 query; the snapshot time is already known)."""
    snapshot = gauge(
        "berth_sync_last_snapshot_timestamp_seconds",
        "When sync took the newest queue usage snapshot.",
    )
    workloads = gauge(
        "berth_sync_workloads_last_seen_timestamp_seconds",
        "When sync last wrote a change to a workload record.",
    )
    if (at := timestamp(newest_snapshot)) is not None:
        snapshot.add(at)
    seen = WorkloadRecord.objects.aggregate(at=Max("synced_at"))["at"]
    if (at := timestamp(seen)) is not None:
        workloads.add(at)
    return [snapshot, workloads]


def sync_step_metrics() -> list[Family]:
    """Each sync step's health (1 query on a table of one row per step); every
    step is listed, run or not, so an alert on ``up == 0`` sees a step that
    never ran as one with no last success."""
    up = gauge(
        "berth_sync_step_up",
        "1 if the sync step's latest run succeeded, 0 if it failed or has not run.",
    )
    last_run = gauge(
        "berth_sync_step_last_run_timestamp_seconds",
        "When the sync step last ran.",
    )
    last_success = gauge(
        "berth_sync_step_last_success_timestamp_seconds",
        "When the sync step last succeeded.",
    )
    consecutive = gauge(
        "berth_sync_step_consecutive_failures",
        "Runs of the sync step that failed in a row (0 once one succeeds).",
    )
    failures = counter(
        "berth_sync_step_failures_total",
        "Runs of the sync step that failed, since Berth's database was created.",
    )
    duration = gauge(
        "berth_sync_step_last_duration_seconds",
        "How long the sync step's latest run took.",
    )
    stored = {row.step: row for row in SyncStepHealth.objects.all()}
    for name in SyncStepName:
        labels = {"step": name.value}
        row = stored.get(name.value)
        up.add(int(row is not None and row.up), labels)
        failures.add(row.failures_total if row is not None else 0, labels)
        if row is None:
            continue
        consecutive.add(row.consecutive_failures, labels)
        if (at := timestamp(row.last_run_at)) is not None:
            last_run.add(at, labels)
        if (at := timestamp(row.last_success_at)) is not None:
            last_success.add(at, labels)
        if row.last_duration_seconds is not None:
            duration.add(row.last_duration_seconds, labels)
    return [up, last_run, last_success, consecutive, failures, duration]


class ClusterCollector:
    """Every family above, read when Prometheus scrapes."""

    def collect(self) -> Iterator[Family]:
        newest_snapshot = stats.latest_snapshot_at()
        yield from queue_status_metrics()
        yield from quota_metrics(newest_snapshot)
        yield from wait_metrics()
        yield from eviction_metrics()
        yield from capacity_metrics()
        yield from sync_metrics(newest_snapshot)
        yield from sync_step_metrics()
