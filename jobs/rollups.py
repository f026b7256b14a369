"""Counting into the hourly rollups as sync records events. Called inside the
transaction that inserts the event, and only when the insert is new, so a
replayed watch event or a second sync never counts twice."""

from __future__ import annotations

import bisect
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F, Model

from jobs.models import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    EventType,
    PreemptionRollup,
    WaitRollup,
    WorkloadEvent,
    WorkloadRecord,
)


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
