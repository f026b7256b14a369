"""What sync recorded about the workloads around a what-if window: what their
Berth jobs declared, when they were first admitted, how long their admission
checks took, and which were running or queued when the window opened.

A window can hold hundreds of thousands of workloads and their events, so
every read here goes through ``.iterator(chunk_size=...)``: on PostgreSQL a
server-side cursor hands over ``chunk_size`` rows at a time, and only what is
kept of each (a few numbers per workload) outlives its chunk."""

from __future__ import annotations

import math
from collections.abc import Iterator
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

# Rows a read of the window holds at once: large enough that a cursor's round
# trips cost little beside the rows, small enough that a window of any size
# reads in a few MiB.
CHUNK_SIZE = 2_000


@dataclass
class Declared:
    """What a Berth job declared of its workload, in seconds of work: its
    expected runtime, its limit (maximum runtime) and its checkpoint interval."""

    expected: int | None = None
    limit: int | None = None
    checkpoint: int | None = None


def job_declarations(*workloads: Any, chunk_size: int = CHUNK_SIZE) -> dict[int, Declared]:
    """What Berth's jobs declared, for the workloads of these querysets."""
    found: dict[int, Declared] = {}
    for rows in workloads:
        jobs = JobRequest.objects.filter(workload__in=rows.values("pk")).values_list(
            "workload_id",
            "expected_runtime_seconds",
            "max_runtime_seconds",
            "checkpoint_interval_seconds",
        )
        for workload_id, expected, limit, checkpoint in jobs.iterator(chunk_size=chunk_size):
            found[workload_id] = Declared(expected, limit, checkpoint)
    return found


def admission_check_delays(rows: Any, *, chunk_size: int = CHUNK_SIZE) -> dict[int, float]:
    """For the workloads of ``rows`` that had admission checks: from their
    first quota reservation to their first admission (the checks' answer);
    infinity for one reserved but never admitted (still waiting)."""
    waiting = rows.exclude(admission_checks={})
    events = WorkloadEvent.objects.filter(
        workload__in=waiting.values("pk"), type__in=(EventType.QUOTA_RESERVED, EventType.ADMITTED)
    )
    reserved: dict[int, datetime] = {}
    admitted: dict[int, datetime] = {}
    ordered = events.order_by("at").values_list("workload_id", "type", "at")
    for workload_id, kind, at in ordered.iterator(chunk_size=chunk_size):
        if kind == EventType.QUOTA_RESERVED:
            reserved.setdefault(workload_id, at)
        elif workload_id in reserved:
            admitted.setdefault(workload_id, at)
    return {
        pk: (admitted[pk] - at).total_seconds() if pk in admitted else math.inf
        for pk, at in reserved.items()
    }


def first_admissions(rows: Any, *, chunk_size: int = CHUNK_SIZE) -> dict[int, datetime]:
    """When each workload of ``rows`` was first admitted (its first Admitted
    transition)."""
    first: dict[int, datetime] = {}
    events = WorkloadEvent.objects.filter(workload__in=rows.values("pk"), type=EventType.ADMITTED)
    ordered = events.order_by("at").values_list("workload_id", "at")
    for workload_id, at in ordered.iterator(chunk_size=chunk_size):
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


def carried_over(start: datetime, *, chunk_size: int = CHUNK_SIZE) -> Iterator[AtStart]:
    """Workloads running or queued when the window opened, from the event log:
    their last transition before ``start`` says which (holding quota, or
    waiting), the first release after it when a running one gave its quota back.

    The candidates and their events are two cursors read side by side, both in
    the candidates' order, so one workload's history is in memory at a time."""
    candidates = live_before(start)
    rows = candidates.order_by("created_at", "id").iterator(chunk_size=chunk_size)
    row = next(rows, None)
    if row is None:
        return  # nothing before the window: no need to read an event log
    events = (
        WorkloadEvent.objects.filter(workload__in=candidates.values("pk"))
        .exclude(type=EventType.CHECK_STATE)
        .order_by("workload__created_at", "workload_id", "at", "id")
        .values_list("workload__created_at", "workload_id", "type", "at")
        .iterator(chunk_size=chunk_size)
    )
    event = next(events, None)
    while row is not None:
        key = (row.created_at, row.pk)
        # Sync may record a workload between the two reads: its events have no
        # row here, and are passed over.
        while event is not None and (event[0], event[1]) < key:
            event = next(events, None)
        history: list[tuple[datetime, str]] = []
        while event is not None and event[1] == row.pk:
            history.append((event[3], event[2]))
            event = next(events, None)
        found = _at_start(row, history, start)
        if found is not None:
            yield found
        row = next(rows, None)


def _at_start(
    row: WorkloadRecord, history: list[tuple[datetime, str]], start: datetime
) -> AtStart | None:
    """What ``row`` was doing when the window opened, from its events: None when
    it had gone."""
    timeline = sorted(history, key=lambda e: (e[0], TRANSITION_ORDER.get(e[1], 9)))
    # What happens at ``start`` is in the window: the state is the one just before.
    before = [(at, kind) for at, kind in timeline if at < start]
    if not before and row.admitted_at is not None and row.admitted_at < start:
        before = [(row.admitted_at, EventType.ADMITTED)]  # no history: its fields
        if row.finished_at is not None:
            timeline = [*before, (row.finished_at, EventType.FINISHED)]
    last = before[-1] if before else None
    if last is not None and last[1] in GONE:
        return None
    if last is not None and last[1] in HOLDS:
        released = next(((at, k) for at, k in timeline if at >= start and k in RELEASES), None)
        return AtStart(row, last[0], *(released if released else (None, "")))
    return AtStart(row, None, None)
