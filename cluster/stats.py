"""Reads for the dashboard and /metrics over the pre-aggregated tables: queue
and capacity snapshots, hourly wait and preemption rollups, queue status.
Nothing here scans the event log."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Max, Sum
from django.utils import timezone

from cluster.models import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    BorrowingRollup,
    CapacitySnapshot,
    FairShareRollup,
    PreemptionRollup,
    QueueSnapshot,
    QueueStatus,
    WaitRollup,
    WorkloadRecord,
    WorkloadState,
)
from queues.models import ClusterQueue

GPU = "nvidia.com/gpu"
# Rows handed to templates and charts: plain dicts of plain values.
Row = dict[str, Any]
DAY = timedelta(days=1)
WEEK = timedelta(days=7)


def quantile(buckets: Sequence[int], q: float) -> float | None:
    """The q-quantile of a histogram with WAIT_BUCKETS bounds, interpolated
    within its bucket as Prometheus' histogram_quantile does; None when empty.
    The open last bucket answers its lower bound."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    lower = 0.0
    for bound, count in zip(WAIT_BUCKETS, buckets, strict=True):
        if count and seen + count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - seen) / count
        seen += count
        lower = bound if not math.isinf(bound) else lower
    return lower


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _summed(rows: Iterable[Sequence[int]]) -> list[int]:
    total = [0] * len(WAIT_BUCKETS)
    for buckets in rows:
        for index, count in enumerate(buckets):
            total[index] += int(count)
    return total


@dataclass
class Waits:
    admissions: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(WAIT_BUCKETS))

    @property
    def p50(self) -> float | None:
        return quantile(self.buckets, 0.5)

    @property
    def p95(self) -> float | None:
        return quantile(self.buckets, 0.95)


def _bucket_sums() -> dict[str, Sum]:
    return {name: Sum(name) for name in BUCKET_FIELDS}


def waits_since(since: datetime, queues: Iterable[str] | None = None) -> dict[str, Waits]:
    """Per ClusterQueue: admissions and their wait histogram since ``since``,
    summed by the database over the hourly rollups."""
    rows = WaitRollup.objects.filter(hour__gte=_hour(since))
    if queues is not None:
        rows = rows.filter(cluster_queue__in=list(queues))
    grouped = (
        rows.values("cluster_queue")
        .annotate(total=Sum("admissions"), **_bucket_sums())
        .order_by("cluster_queue")
    )
    result = {}
    for summed in grouped:
        row: dict[str, Any] = dict(summed)  # the bucket keys are built, not literal
        result[row["cluster_queue"]] = Waits(
            int(row["total"] or 0), [int(row[name] or 0) for name in BUCKET_FIELDS]
        )
    return result


def wait_histogram(queue: str, since: datetime) -> list[dict[str, float | int]]:
    waits = waits_since(since, [queue]).get(queue, Waits())
    return [{"le": b, "count": c} for b, c in zip(WAIT_BUCKETS, waits.buckets, strict=True)]


def daily_waits(queue: str, days: int = 14, now: datetime | None = None) -> list[Row]:
    """p50/p95 wait and admissions per UTC day, oldest first."""
    now = now or timezone.now()
    start = (now - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    per_day: dict[date, list[list[int]]] = defaultdict(list)
    counts: dict[date, int] = defaultdict(int)
    for row in WaitRollup.objects.filter(cluster_queue=queue, hour__gte=start).only(
        "hour", "admissions", *BUCKET_FIELDS
    ):
        per_day[row.hour.date()].append(row.buckets)
        counts[row.hour.date()] += row.admissions
    rows = []
    for offset in range(days):
        day = (start + timedelta(days=offset)).date()
        buckets = _summed(per_day.get(day, []))
        rows.append(
            {
                "day": day,
                "p50_seconds": quantile(buckets, 0.5),
                "p95_seconds": quantile(buckets, 0.95),
                "admissions": counts.get(day, 0),
            }
        )
    return rows


def preemptions_since(since: datetime, queue: str | None = None) -> list[Row]:
    """Evictions by reason since ``since`` (preemptions and other evictions)."""
    rows = PreemptionRollup.objects.filter(
        hour__gte=since.replace(minute=0, second=0, microsecond=0)
    )
    if queue is not None:
        rows = rows.filter(cluster_queue=queue)
    grouped = (
        rows.values("reason", "preempted")
        .annotate(count=Sum("count"), gpu_seconds=Sum("gpu_seconds_interrupted"))
        .order_by("-count", "reason")
    )
    return [
        {
            "reason": row["reason"],
            "preempted": row["preempted"],
            "count": int(row["count"] or 0),
            "gpu_hours_lost": round(float(row["gpu_seconds"] or 0) / 3600, 2),
        }
        for row in grouped
    ]


def preemption_counts(since: datetime, queues: Iterable[str] | None = None) -> dict[str, int]:
    """Preemptions per ClusterQueue since ``since``."""
    rollups = PreemptionRollup.objects.filter(hour__gte=_hour(since))
    if queues is not None:
        rollups = rollups.filter(cluster_queue__in=list(queues))
    rows = rollups.values("cluster_queue").annotate(n=Sum("count"))
    return {row["cluster_queue"]: int(row["n"] or 0) for row in rows}


def latest_snapshot_at() -> datetime | None:
    return QueueSnapshot.objects.aggregate(at=Max("at"))["at"]


def queue_usage(
    resource: str = GPU, queues: Iterable[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per ClusterQueue, summed over flavors, from the newest snapshot:
    nominal, usage, borrowed, lent."""
    newest = latest_snapshot_at()
    if newest is None:
        return {}
    result: dict[str, dict[str, Any]] = {}
    rows = QueueSnapshot.objects.filter(at=newest, resource=resource)
    if queues is not None:
        rows = rows.filter(cluster_queue__in=list(queues))
    for name, nominal, usage, borrowed, lent, utilised in rows.values_list(
        "cluster_queue", "nominal", "usage", "borrowed", "lent", "utilised"
    ):
        entry = result.setdefault(name, {"nominal": 0, "usage": 0, "borrowed": 0, "lent": 0})
        entry["nominal"] += nominal
        entry["usage"] += usage
        entry["borrowed"] += borrowed
        entry["lent"] += lent
        if utilised is not None:
            entry["utilised"] = entry.get("utilised", 0) + utilised
    return result


def queue_quota_rows(queue: str) -> list[Row]:
    """Nominal, usage, borrowed and lent per flavor × resource, newest snapshot."""
    newest = QueueSnapshot.objects.filter(cluster_queue=queue).aggregate(at=Max("at"))["at"]
    if newest is None:
        return []
    rows = QueueSnapshot.objects.filter(cluster_queue=queue, at=newest).order_by(
        "flavor", "resource"
    )
    return [
        dict(r) for r in rows.values("flavor", "resource", "nominal", "usage", "borrowed", "lent")
    ]


def queue_usage_series(queue: str, since: datetime, resource: str = GPU) -> list[Row]:
    rows = QueueSnapshot.objects.filter(cluster_queue=queue, resource=resource, at__gte=since)
    return [
        dict(r)
        for r in rows.order_by("at", "flavor").values(
            "at", "flavor", "usage", "borrowed", "nominal"
        )
    ]


def pending_by_queue() -> list[Row]:
    """Pending workloads and the GPUs they ask for, per ClusterQueue (from the
    workload table's state index; pending rows are few)."""
    counts: dict[str, dict[str, int]] = {}
    for queue, requested in WorkloadRecord.objects.filter(state=WorkloadState.PENDING).values_list(
        "cluster_queue", "requested"
    ):
        entry = counts.setdefault(queue or "(unknown)", {"pending": 0, "gpus": 0})
        entry["pending"] += 1
        entry["gpus"] += int((requested or {}).get(GPU, 0))
    return [
        {"cluster_queue": q, "pending_workloads": v["pending"], "requested_gpus": v["gpus"]}
        for q, v in sorted(counts.items(), key=lambda kv: (-kv[1]["gpus"], kv[0]))
    ]


def capacity_series(since: datetime) -> list[Row]:
    """GPU capacity (node allocatable), allocation (the queues' usage, summed
    when the snapshot was taken) and utilisation per flavor over time."""
    capacity: dict[tuple[datetime, str], int] = {}
    utilised: dict[tuple[datetime, str], float | None] = {}
    allocated: dict[tuple[datetime, str], int] = {}
    for at, flavor, amount, busy, held in CapacitySnapshot.objects.filter(
        resource=GPU, at__gte=since
    ).values_list("at", "flavor", "allocatable", "utilised", "allocated"):
        capacity[(at, flavor)] = amount
        utilised[(at, flavor)] = busy
        allocated[(at, flavor)] = held
    keys = sorted(set(capacity) | set(allocated))
    return [
        {
            "at": at,
            "flavor": flavor,
            "capacity": capacity.get((at, flavor), 0),
            "allocated": allocated.get((at, flavor), 0),
            "utilised": utilised.get((at, flavor)),
        }
        for at, flavor in keys
    ]


def capacity_now() -> list[Row]:
    """Per flavor: GPUs the nodes offer (newest capacity snapshot) and GPUs the
    queues hold (newest queue snapshot); a flavor seen in only one has 0 in the other."""
    capacity: dict[str, tuple[int, int]] = {}
    busy: dict[str, float | None] = {}
    newest = CapacitySnapshot.objects.aggregate(at=Max("at"))["at"]
    if newest is not None:
        for flavor, allocatable, nodes, utilised in CapacitySnapshot.objects.filter(
            at=newest, resource=GPU
        ).values_list("flavor", "allocatable", "nodes", "utilised"):
            capacity[flavor] = (allocatable, nodes)
            busy[flavor] = utilised
    usage: dict[str, int] = defaultdict(int)
    snap = latest_snapshot_at()
    if snap is not None:
        for flavor, amount in QueueSnapshot.objects.filter(at=snap, resource=GPU).values_list(
            "flavor", "usage"
        ):
            usage[flavor] += amount
    return [
        {
            "flavor": flavor,
            "capacity": capacity.get(flavor, (0, 0))[0],
            "allocated": usage.get(flavor, 0),
            "utilised": busy.get(flavor),
            "nodes": capacity.get(flavor, (0, 0))[1],
        }
        for flavor in sorted(set(capacity) | set(usage))
    ]


@dataclass
class QueueRow:
    name: str
    team: str
    queue_class: str
    cohort: str
    nominal: int = 0
    usage: int = 0
    borrowed: int = 0
    lent: int = 0
    utilised: float | None = None  # GPUs busy, when measured
    pending: int = 0
    admitted: int = 0
    p50_day: float | None = None
    p95_day: float | None = None
    p50_week: float | None = None
    p95_week: float | None = None
    preemptions_week: int = 0


def queue_rows(now: datetime | None = None, names: Iterable[str] | None = None) -> list[QueueRow]:
    """Every ClusterQueue of the policy (or those named) with its GPU figures
    and wait statistics."""
    now = now or timezone.now()
    wanted = list(names) if names is not None else None
    usage = queue_usage(queues=wanted)
    statuses = QueueStatus.objects.filter(kind="ClusterQueue")
    queues = ClusterQueue.objects.order_by("name")
    if wanted is not None:
        statuses = statuses.filter(name__in=wanted)
        queues = queues.filter(name__in=wanted)
    status = {
        name: (pending, admitted)
        for name, pending, admitted in statuses.values_list(
            "name", "pending_workloads", "admitted_workloads"
        )
    }
    day, week = waits_since(now - DAY, wanted), waits_since(now - WEEK, wanted)
    preempted = preemption_counts(now - WEEK, wanted)
    rows = []
    # Plain values, not model instances: hundreds of queues per page view.
    for name, team, queue_class, cohort in queues.values_list(
        "name", "team__slug", "queue_class__name", "cohort__name"
    ):
        figures = usage.get(name, {})
        pending, admitted = status.get(name, (0, 0))
        today, this_week = day.get(name), week.get(name)
        rows.append(
            QueueRow(
                name=name,
                team=team or "",
                queue_class=queue_class or "",
                cohort=cohort or "",
                nominal=figures.get("nominal", 0),
                usage=figures.get("usage", 0),
                borrowed=figures.get("borrowed", 0),
                lent=figures.get("lent", 0),
                utilised=round(figures["utilised"], 1) if "utilised" in figures else None,
                pending=pending,
                admitted=admitted,
                p50_day=today.p50 if today else None,
                p95_day=today.p95 if today else None,
                p50_week=this_week.p50 if this_week else None,
                p95_week=this_week.p95 if this_week else None,
                preemptions_week=preempted.get(name, 0),
            )
        )
    return rows


__all__ = [
    "QueueRow",
    "Waits",
    "admitted_total",
    "capacity_now",
    "capacity_series",
    "daily_waits",
    "pending_by_queue",
    "preemptions_since",
    "quantile",
    "queue_quota_rows",
    "queue_rows",
    "queue_usage_series",
    "wait_histogram",
    "waits_since",
]


def worst_waits(since: datetime, limit: int = 5) -> list[Row]:
    """The ClusterQueues with the longest p95 wait since ``since``."""
    ranked = sorted(
        ((w.p95, name, w.p50) for name, w in waits_since(since).items() if w.p95 is not None),
        key=lambda r: (-r[0], r[1]),
    )
    return [
        {"cluster_queue": name, "p50_seconds": p50, "p95_seconds": p95}
        for p95, name, p50 in ranked[:limit]
    ]


def pending_total() -> int:
    """Workloads pending across every ClusterQueue, as Kueue last reported."""
    total = QueueStatus.objects.filter(kind="ClusterQueue").aggregate(n=Sum("pending_workloads"))
    return int(total["n"] or 0)


def admitted_total() -> int:
    """Workloads admitted across every ClusterQueue, as Kueue last reported:
    every team's, submitted through Berth or not."""
    total = QueueStatus.objects.filter(kind="ClusterQueue").aggregate(n=Sum("admitted_workloads"))
    return int(total["n"] or 0)


def borrowing_matrix(since: datetime) -> tuple[list[str], list[str], list[list[float]]]:
    """GPU-hours borrowed (rows: borrowers) from each lender (columns) since
    ``since``, over every flavor."""
    totals: dict[tuple[str, str], float] = {}
    for row in (
        BorrowingRollup.objects.filter(hour__gte=_hour(since))
        .values("borrower", "lender")
        .annotate(seconds=Sum("gpu_seconds"))
    ):
        totals[(row["borrower"], row["lender"])] = float(row["seconds"] or 0) / 3600
    borrowers = sorted({b for b, _ in totals})
    lenders = sorted({lender for _, lender in totals})
    matrix = [[round(totals.get((b, lender), 0.0), 2) for lender in lenders] for b in borrowers]
    return lenders, borrowers, matrix


def fair_share_series(since: datetime, limit: int = 10) -> list[Row]:
    """Hourly weighted share of the queues that borrowed most since ``since``."""
    rollups = FairShareRollup.objects.filter(hour__gte=_hour(since))
    top = [
        row["cluster_queue"]
        for row in rollups.values("cluster_queue")
        .annotate(total=Sum("share_sum"))
        .filter(total__gt=0)
        .order_by("-total", "cluster_queue")[:limit]
    ]
    return [
        {"at": hour, "cluster_queue": name, "share": total / samples if samples else 0.0}
        for hour, name, total, samples in rollups.filter(cluster_queue__in=top)
        .order_by("hour", "cluster_queue")
        .values_list("hour", "cluster_queue", "share_sum", "samples")
    ]


def utilisation_source() -> str:
    """Who measured the newest utilisation ("prometheus", "simulated" or "")."""
    newest = CapacitySnapshot.objects.filter(resource=GPU).aggregate(at=Max("at"))["at"]
    if newest is None:
        return ""
    found = (
        CapacitySnapshot.objects.filter(at=newest, resource=GPU)
        .exclude(utilisation_source="")
        .values_list("utilisation_source", flat=True)
        .first()
    )
    return found or ""
