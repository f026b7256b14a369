"""``GET /metrics``: Berth's figures in the Prometheus text exposition format.

Everything comes from Postgres (never from the cluster), and only from the
small or pre-aggregated tables sync keeps: queue status, the newest queue and
capacity snapshots, the hourly wait and preemption rollups, job counts, the
reconcile log. No event-log scans, and the number of queries does not grow
with the number of queues.

Names mirror Kueue's metrics where they mean the same (``kueue_x`` →
``berth_x``), so a dashboard built on Kueue's metrics ports by renaming. Where
what Berth stores differs from what Kueue reports, the name says what it is.

Two parts here: the reads (``collect``: one function per table) and the view
with its access rule; the exposition format itself is ``cluster.exposition``.

Access: with ``BERTH_METRICS_TOKEN`` set, only ``Authorization: Bearer
<token>`` (401 otherwise). Without it, requests from loopback (not forwarded by
a proxy) and signed-in platform admins; anyone else gets 403 naming the setting.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Max, Subquery, Sum
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from accounts.models import AccessDenial
from accounts.roles import is_platform_admin
from accounts.services import record_access_denial
from cluster import stats
from cluster.exposition import CONTENT_TYPE, Metric, histogram_samples, render
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
from jobs.models import JobState
from queues.models import DriftRecord, ReconcileRun
from queues.quantity import Unit, unit_for
from queues.reconcile import applied_policy_version, policy_version

# ---------------------------------------------------------------------------
# The reads (Postgres only; a fixed number of queries)
# ---------------------------------------------------------------------------


def in_base_unit(resource: str, amount: int) -> float:
    """A canonical stored amount in Prometheus' base units: CPU in cores (stored
    as milli-CPU), memory in bytes, GPUs and other counts as they are."""
    return amount / 1000 if unit_for(resource) is Unit.MILLI else amount


def _timestamp(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def queue_status_metrics() -> list[Metric]:
    """From Kueue's ClusterQueue status as sync last mirrored it (1 query)."""
    pending = Metric(
        "berth_pending_workloads",
        "gauge",
        "Workloads waiting for admission in the ClusterQueue (status.pendingWorkloads). "
        "Kueue's ClusterQueue status does not split active from inadmissible, so unlike "
        "kueue_pending_workloads there is no status label.",
    )
    reserving = Metric(
        "berth_reserving_active_workloads",
        "gauge",
        "Workloads holding quota in the ClusterQueue, admitted or waiting for admission "
        "checks (status.reservingWorkloads).",
    )
    admitted = Metric(
        "berth_admitted_active_workloads",
        "gauge",
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


def quota_metrics(newest: datetime | None) -> list[Metric]:
    """Per ClusterQueue × flavor × resource from the newest queue snapshot (1
    query). Sync snapshots every queue at the same instant, so the newest
    snapshot is every live queue's newest, and a deleted queue drops out."""
    scope = " per flavor and resource, from the newest queue snapshot"
    units = " (CPU in cores, memory in bytes, GPUs and other resources as counts)."
    reservation = Metric(
        "berth_cluster_queue_resource_reservation",
        "gauge",
        "Quota reserved by the ClusterQueue's workloads (Kueue's flavorsReservation)"
        + scope
        + units,
    )
    nominal = Metric(
        "berth_cluster_queue_nominal_quota",
        "gauge",
        "The ClusterQueue's nominal quota" + scope + units,
    )
    borrowing = Metric(
        "berth_cluster_queue_borrowing",
        "gauge",
        "Quota the ClusterQueue is borrowing from its cohort now (not the borrowing limit)"
        + scope
        + units,
    )
    lent = Metric(
        "berth_cluster_queue_lent",
        "gauge",
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


def wait_metrics() -> list[Metric]:
    """The admission wait histogram per ClusterQueue, summed over every stored
    hourly rollup by the database (1 query; no rows come back per hour)."""
    histogram = Metric(
        "berth_admission_wait_time_seconds",
        "histogram",
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
        histogram_samples(
            histogram,
            {"cluster_queue": row["cluster_queue"]},
            WAIT_BUCKETS,
            counts,
            float(row["wait_sum"] or 0.0),
        )
    return [histogram]


PREEMPTED_REASON = "Preempted"  # Kueue's eviction reason for a preemption


def eviction_metrics() -> list[Metric]:
    """Preemptions and other evictions per ClusterQueue and reason, summed over
    every stored hourly rollup (1 query)."""
    preempted = Metric(
        "berth_preempted_workloads_total",
        "counter",
        "Workloads preempted, by the preempted workload's ClusterQueue and Kueue's "
        "preemption reason (kueue_preempted_workloads_total counts by the preempting "
        "queue). Over every stored hourly rollup.",
    )
    evicted = Metric(
        "berth_evicted_workloads_total",
        "counter",
        "Workloads evicted, by ClusterQueue and Kueue's eviction reason; preemptions count "
        'under reason="Preempted", as in kueue_evicted_workloads_total. '
        "Over every stored hourly rollup.",
    )
    gpu_seconds = Metric(
        "berth_preempted_gpu_seconds_total",
        "counter",
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


def capacity_metrics() -> list[Metric]:
    """Node capacity per flavor from the newest capacity snapshot (1 query)."""
    allocatable = Metric(
        "berth_node_allocatable",
        "gauge",
        "Allocatable resources of the nodes the ResourceFlavor's labels select, newest "
        "capacity snapshot (CPU in cores, memory in bytes, GPUs as counts).",
    )
    nodes = Metric(
        "berth_nodes",
        "gauge",
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


def job_metrics() -> list[Metric]:
    """Job requests by state (1 GROUP BY); every state is listed, zero or not."""
    jobs = Metric("berth_jobs", "gauge", "Job requests submitted through Berth, by state.")
    counts = stats.job_counts()
    for state in JobState:
        jobs.add(counts.get(state.value, 0), {"state": state.value})
    return [jobs]


# The states the newest run can be in: dry runs (plans) and runs skipped because
# another was running did nothing to the cluster and are left out.
RUN_STATUSES = (
    ReconcileRun.Status.RUNNING,
    ReconcileRun.Status.SUCCEEDED,
    ReconcileRun.Status.PARTIAL,
    ReconcileRun.Status.FAILED,
)


def reconcile_metrics() -> list[Metric]:
    """Reconcile health and policy versions (5 queries, each on an index or a
    small table)."""
    last_run = Metric(
        "berth_reconcile_last_run_timestamp_seconds",
        "gauge",
        "When the newest reconcile run started (dry runs and skipped runs left out).",
    )
    last_success = Metric(
        "berth_reconcile_last_success_timestamp_seconds",
        "gauge",
        "When the newest fully successful reconcile run finished.",
    )
    last_status = Metric(
        "berth_reconcile_last_status",
        "gauge",
        "1 for the status of the newest reconcile run, 0 for the others.",
    )
    errors = Metric(
        "berth_reconcile_errors",
        "gauge",
        "Objects the cluster refused in the newest reconcile run.",
    )
    drift = Metric(
        "berth_reconcile_drift_total",
        "counter",
        "Hand edits on the cluster that reconcile found and put back (stored drift records).",
    )
    version = Metric(
        "berth_policy_version",
        "gauge",
        "The newest policy change id in Postgres.",
    )
    applied = Metric(
        "berth_applied_policy_version",
        "gauge",
        "The policy version the newest successful or partial apply rendered; -1 if none. "
        "Below berth_policy_version while a change waits to reach the cluster.",
    )
    runs = ReconcileRun.objects.filter(dry_run=False).order_by("-pk")
    newest = runs.filter(status__in=RUN_STATUSES).values("status", "started_at", "errors").first()
    if newest is not None:
        if (started := _timestamp(newest["started_at"])) is not None:
            last_run.add(started)
        for status in RUN_STATUSES:
            last_status.add(int(newest["status"] == status), {"status": status.value})
        errors.add(len(newest["errors"] or []))
    succeeded = (
        runs.filter(status=ReconcileRun.Status.SUCCEEDED, finished_at__isnull=False)
        .values_list("finished_at", flat=True)
        .first()
    )
    if (finished := _timestamp(succeeded)) is not None:
        last_success.add(finished)
    drift.add(DriftRecord.objects.count())
    version.add(policy_version())
    applied.add(applied_policy_version())
    return [last_run, last_success, last_status, errors, drift, version, applied]


def sync_metrics(newest_snapshot: datetime | None) -> list[Metric]:
    """When sync last wrote (1 query; the snapshot time is already known)."""
    snapshot = Metric(
        "berth_sync_last_snapshot_timestamp_seconds",
        "gauge",
        "When sync took the newest queue usage snapshot.",
    )
    workloads = Metric(
        "berth_sync_workloads_last_seen_timestamp_seconds",
        "gauge",
        "When sync last wrote a change to a workload record.",
    )
    if (at := _timestamp(newest_snapshot)) is not None:
        snapshot.add(at)
    seen = WorkloadRecord.objects.aggregate(at=Max("synced_at"))["at"]
    if (at := _timestamp(seen)) is not None:
        workloads.add(at)
    return [snapshot, workloads]


def sync_step_metrics() -> list[Metric]:
    """Each sync step's health (1 query on a table of one row per step); every
    step is listed, run or not, so an alert on ``up == 0`` sees a step that
    never ran as one with no last success."""
    up = Metric(
        "berth_sync_step_up",
        "gauge",
        "1 if the sync step's latest run succeeded, 0 if it failed or has not run.",
    )
    last_run = Metric(
        "berth_sync_step_last_run_timestamp_seconds",
        "gauge",
        "When the sync step last ran.",
    )
    last_success = Metric(
        "berth_sync_step_last_success_timestamp_seconds",
        "gauge",
        "When the sync step last succeeded.",
    )
    consecutive = Metric(
        "berth_sync_step_consecutive_failures",
        "gauge",
        "Runs of the sync step that failed in a row (0 once one succeeds).",
    )
    failures = Metric(
        "berth_sync_step_failures_total",
        "counter",
        "Runs of the sync step that failed, since Berth's database was created.",
    )
    duration = Metric(
        "berth_sync_step_last_duration_seconds",
        "gauge",
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
        if (at := _timestamp(row.last_run_at)) is not None:
            last_run.add(at, labels)
        if (at := _timestamp(row.last_success_at)) is not None:
            last_success.add(at, labels)
        if row.last_duration_seconds is not None:
            duration.add(row.last_duration_seconds, labels)
    return [up, last_run, last_success, consecutive, failures, duration]


def collect() -> list[Metric]:
    """Every family /metrics exposes, read from Postgres."""
    from approvals.metrics import approval_metrics  # it builds on this module

    newest_snapshot = stats.latest_snapshot_at()
    return [
        *queue_status_metrics(),
        *quota_metrics(newest_snapshot),
        *wait_metrics(),
        *eviction_metrics(),
        *capacity_metrics(),
        *job_metrics(),
        *reconcile_metrics(),
        *sync_metrics(newest_snapshot),
        *sync_step_metrics(),
        *approval_metrics(),
    ]


# ---------------------------------------------------------------------------
# The view
# ---------------------------------------------------------------------------

FORBIDDEN_TEXT = (
    "403 Forbidden: /metrics answers loopback and signed-in platform admins only; "
    "set BERTH_METRICS_TOKEN and scrape with Authorization: Bearer <token>\n"
)
UNAUTHORIZED_TEXT = "401 Unauthorized: send Authorization: Bearer <BERTH_METRICS_TOKEN>\n"


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, credentials = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


def from_loopback(request: HttpRequest) -> bool:
    """A request from this machine, not forwarded by a proxy (behind a proxy on
    the same host every request comes from loopback; the proxy's forwarding
    header gives it away)."""
    if request.META.get("HTTP_X_FORWARDED_FOR") or request.META.get("HTTP_FORWARDED"):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _text(body: str, status: int) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")


def refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read /metrics, else the answer (recorded in
    the access log like every refused attempt)."""
    token: str = settings.BERTH_METRICS_TOKEN
    if token:
        given = _bearer(request)
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            return None
        reason = (
            AccessDenial.Reason.NOT_AUTHENTICATED
            if given is None
            else AccessDenial.Reason.BAD_CREDENTIALS
        )
        record_access_denial(request, reason=reason, detail="/metrics: no valid metrics token")
        response = _text(UNAUTHORIZED_TEXT, 401)
        response["WWW-Authenticate"] = 'Bearer realm="berth-metrics"'
        return response
    if from_loopback(request) or is_platform_admin(getattr(request, "user", None)):
        return None
    record_access_denial(
        request,
        reason=AccessDenial.Reason.FORBIDDEN,
        detail="/metrics: not loopback, not a platform admin, no BERTH_METRICS_TOKEN set",
    )
    return _text(FORBIDDEN_TEXT, 403)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus scrape endpoint; see the module docstring for who may read it."""
    refused = refusal(request)
    if refused is not None:
        return refused
    response = HttpResponse(render(collect()), content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    return response


__all__ = ["collect", "in_base_unit", "metrics_view"]
