"""Counting into the hourly rollups as sync records events. Called inside the
transaction that inserts the event, and only when the insert is new, so a
replayed watch event or a second sync never counts twice. Admissions and
evictions also open and end the GPU allocations showback counts, and each new
snapshot instant counts them into the daily usage rollup
(``cluster.allocation``)."""

from __future__ import annotations

import bisect
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Model

from cluster import utilisation
from cluster.allocation import (
    count_snapshot,
    count_team_borrowing,
    end_allocation,
    open_allocation,
)
from cluster.models import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    BorrowingRollup,
    EventType,
    FairShareRollup,
    PreemptionRollup,
    QueueSnapshot,
    WaitRollup,
    WorkloadEvent,
    WorkloadRecord,
)

GPU = "nvidia.com/gpu"


def hour_of(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def bucket_of(wait_seconds: float) -> int:
    return bisect.bisect_left(WAIT_BUCKETS, wait_seconds)


def _queued_at(record: WorkloadRecord, admitted: datetime) -> datetime:
    """When this admission's wait began: the last requeue before it, else creation."""
    requeued = (
        WorkloadEvent.objects.filter(workload=record, type=EventType.REQUEUED, at__lte=admitted)
        .order_by("-at")
        .values_list("at", flat=True)
        .first()
    )
    return requeued or record.created_at


def _locked(model: type[Model], **keys: object) -> Model:
    """The rollup row for ``keys``, created if missing, locked for this transaction."""
    row = model._default_manager.select_for_update().filter(**keys).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            return model._default_manager.create(**keys)
    except IntegrityError:  # another sync created it a moment ago
        return model._default_manager.select_for_update().get(**keys)


def count_admission(record: WorkloadRecord, at: datetime) -> None:
    if not record.cluster_queue:
        return
    wait = max(0.0, (at - _queued_at(record, at)).total_seconds())
    row = _locked(WaitRollup, cluster_queue=record.cluster_queue, hour=hour_of(at))
    bucket = BUCKET_FIELDS[bucket_of(wait)]
    WaitRollup.objects.filter(pk=row.pk).update(
        admissions=F("admissions") + 1,
        wait_seconds_sum=F("wait_seconds_sum") + wait,
        gpus_admitted=F("gpus_admitted") + record.gpus,
        **{bucket: F(bucket) + 1},
    )
    open_allocation(record, at)


def count_eviction(record: WorkloadRecord, at: datetime, reason: str, *, preempted: bool) -> None:
    if not record.cluster_queue:
        return
    admitted = (
        WorkloadEvent.objects.filter(workload=record, type=EventType.ADMITTED, at__lte=at)
        .order_by("-at")
        .values_list("at", flat=True)
        .first()
    )
    interrupted = max(0.0, (at - admitted).total_seconds()) * record.gpus if admitted else 0.0
    row = _locked(
        PreemptionRollup,
        cluster_queue=record.cluster_queue,
        hour=hour_of(at),
        reason=reason[:64] or "Unknown",
        preempted=preempted,
    )
    PreemptionRollup.objects.filter(pk=row.pk).update(
        count=F("count") + 1,
        gpu_seconds_interrupted=F("gpu_seconds_interrupted") + interrupted,
    )
    end_allocation(record, at, admitted, preempted=preempted)


def _add_hourly(
    model: type[Model], unique: tuple[str, ...], rows: list[tuple[dict[str, Any], dict[str, float]]]
) -> None:
    """Add each row's amounts to the rollup row its ``unique`` fields name (created
    if missing), in three queries however many rows; all rows share one hour."""
    if not rows:
        return
    manager = model._default_manager
    with transaction.atomic():
        stored = {
            tuple(getattr(row, f) for f in unique): row
            for row in manager.select_for_update().filter(hour=rows[0][0]["hour"])
        }
        changed: dict[int, Model] = {}
        new: dict[tuple[Any, ...], Model] = {}
        for keys, amounts in rows:
            key = tuple(keys[f] for f in unique)
            row = stored.get(key) or new.get(key)
            if row is None:
                new[key] = model(**keys, **amounts)
                continue
            for name, value in amounts.items():
                setattr(row, name, getattr(row, name) + value)
            if row.pk is not None:
                changed[row.pk] = row
        fields = sorted({name for _, amounts in rows for name in amounts})
        if changed:
            manager.bulk_update(list(changed.values()), fields)
        if new:
            manager.bulk_create(list(new.values()))


def count_borrowing(
    rows: list[QueueSnapshot],
    trees: dict[int, str],
    weights: dict[str, float],
    seconds: float,
) -> None:
    """From one instant's snapshot rows (lent already attributed): who
    borrowed from whom for ``seconds`` (by queue, hourly; by team, daily), and
    each queue's weighted share; and the GPU time allocated up to that instant
    (showback's daily usage, ``cluster.allocation.count_snapshot``)."""
    if not rows:
        return
    count_snapshot(rows, rows[0].at, seconds, utilisation.source())
    hour = hour_of(rows[0].at)
    groups: dict[tuple[str, str], list[QueueSnapshot]] = {}
    members: dict[str, list[QueueSnapshot]] = {}
    for index, row in enumerate(rows):
        tree = trees.get(index)
        if not tree or row.resource != GPU:
            continue
        groups.setdefault((tree, row.flavor), []).append(row)
        members.setdefault(tree, []).append(row)
    pairs: list[tuple[dict[str, Any], dict[str, float]]] = []
    for (_, flavor), group in sorted(groups.items()):
        lent = sum(r.lent for r in group)
        if not lent:
            continue
        for borrower in (r for r in group if r.borrowed):
            for lender in group:
                if not lender.lent or lender.cluster_queue == borrower.cluster_queue:
                    continue
                keys = {
                    "hour": hour,
                    "borrower": borrower.cluster_queue,
                    "lender": lender.cluster_queue,
                    "flavor": flavor,
                }
                pairs.append(
                    (keys, {"gpu_seconds": borrower.borrowed * lender.lent / lent * seconds})
                )
    _add_hourly(BorrowingRollup, ("hour", "borrower", "lender", "flavor"), pairs)
    count_team_borrowing(pairs)
    shares: list[tuple[dict[str, Any], dict[str, float]]] = []
    for tree, group in sorted(members.items()):
        lendable = sum(r.nominal for r in group)
        borrowed: dict[str, int] = {}
        for row in group:
            borrowed[row.cluster_queue] = borrowed.get(row.cluster_queue, 0) + row.borrowed
        for name, amount in sorted(borrowed.items()):
            share = amount / lendable / max(weights.get(name, 1.0), 1e-9) if lendable else 0.0
            shares.append(
                (
                    {"hour": hour, "cluster_queue": name, "cohort": tree},
                    {"share_sum": share, "samples": 1},
                )
            )
    _add_hourly(FairShareRollup, ("hour", "cluster_queue"), shares)
