"""What sync recorded about the workloads around a what-if window: what their
Berth jobs declared, when they were first admitted, how long their admission
checks took, and which were running or queued when the window opened."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cluster.models import TRANSITION_ORDER, EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from jobs.models import JobRequest

# Events that end a run: the workload gives its quota back.
RELEASES = (
    EventType.FINISHED,
    EventType.FAILED,
    EventType.EVICTED,
    EventType.PREEMPTED,
    EventType.DEACTIVATED,
    EventType.DELETED,
)
GONE = (EventType.FINISHED, EventType.FAILED, EventType.DEACTIVATED, EventType.DELETED)
HOLDS = (EventType.ADMITTED, EventType.QUOTA_RESERVED)


@dataclass
class Declared:
    """What a Berth job declared of its workload, in seconds of work: its
    expected runtime, its limit (maximum runtime) and its checkpoint interval."""

    expected: int | None = None
    limit: int | None = None
    checkpoint: int | None = None


def job_declarations(*workloads: Any) -> dict[int, Declared]:
    """What Berth's jobs declared, for the workloads of these querysets."""
    found: dict[int, Declared] = {}
    for rows in workloads:
        for workload_id, expected, limit, checkpoint in JobRequest.objects.filter(
            workload__in=rows.values("pk")
        ).values_list(
            "workload_id",
            "expected_runtime_seconds",
            "max_runtime_seconds",
            "checkpoint_interval_seconds",
        ):
            found[workload_id] = Declared(expected, limit, checkpoint)
    return found


def admission_check_delays(rows: Any) -> dict[int, float]:
    """For the workloads of ``rows`` that had admission checks: from their
    first quota reservation to their first admission (the checks' answer);
    infinity for one reserved but never admitted (still waiting)."""
    waiting = rows.exclude(admission_checks={})
    events = WorkloadEvent.objects.filter(
        workload__in=waiting.values("pk"), type__in=(EventType.QUOTA_RESERVED, EventType.ADMITTED)
    )
    reserved: dict[int, datetime] = {}
    admitted: dict[int, datetime] = {}
    for workload_id, kind, at in events.order_by("at").values_list("workload_id", "type", "at"):
        if kind == EventType.QUOTA_RESERVED:
            reserved.setdefault(workload_id, at)
        elif workload_id in reserved:
            admitted.setdefault(workload_id, at)
    return {
        pk: (admitted[pk] - at).total_seconds() if pk in admitted else math.inf
        for pk, at in reserved.items()
    }


def first_admissions(rows: Any) -> dict[int, datetime]:
    """When each workload of ``rows`` was first admitted (its first Admitted
    transition)."""
    first: dict[int, datetime] = {}
    events = WorkloadEvent.objects.filter(workload__in=rows.values("pk"), type=EventType.ADMITTED)
    for workload_id, at in events.order_by("at").values_list("workload_id", "at"):
        first.setdefault(workload_id, at)
    return first


@dataclass
class AtStart:
    """A workload created before the window that had not gone when it opened."""

    row: WorkloadRecord
    admitted: datetime | None  # the run that held quota when the window opened
    released: datetime | None  # when that run ended (finished, evicted, deleted)
    release_kind: str = ""


def live_before(start: datetime) -> Any:
    """The workloads created before ``start`` that had not gone by then."""
    return (
        WorkloadRecord.objects.filter(created_at__lt=start)
        .exclude(finished_at__lte=start)
        # Gone for good before the window opened: their last write was before it.
        .exclude(state__in=(WorkloadState.DELETED, WorkloadState.DEACTIVATED), synced_at__lte=start)
    )


def carried_over(start: datetime) -> list[AtStart]:
    """Workloads running or queued when the window opened, from the event log:
    their last transition before ``start`` says which (holding quota, or
    waiting), the first release after it when a running one gave its quota back."""
    candidates = live_before(start)
    rows = {row.pk: row for row in candidates.order_by("created_at", "id")}
    if not rows:
        return []
    history: dict[int, list[tuple[datetime, str]]] = {pk: [] for pk in rows}
    events = WorkloadEvent.objects.filter(workload__in=candidates.values("pk")).exclude(
        type=EventType.CHECK_STATE
    )
    for workload_id, kind, at in events.values_list("workload_id", "type", "at"):
        history[workload_id].append((at, kind))
    found = []
    for pk, row in rows.items():
        timeline = sorted(history[pk], key=lambda e: (e[0], TRANSITION_ORDER.get(e[1], 9)))
        # What happens at ``start`` is in the window: the state is the one just before.
        before = [(at, kind) for at, kind in timeline if at < start]
        if not before and row.admitted_at is not None and row.admitted_at < start:
            before = [(row.admitted_at, EventType.ADMITTED)]  # no history: its fields
            if row.finished_at is not None:
                timeline = [*before, (row.finished_at, EventType.FINISHED)]
        last = before[-1] if before else None
        if last is not None and last[1] in GONE:
            continue
        if last is not None and last[1] in HOLDS:
            released = next(((at, k) for at, k in timeline if at >= start and k in RELEASES), None)
            found.append(AtStart(row, last[0], *(released if released else (None, ""))))
        else:
            found.append(AtStart(row, None, None))
    return found
