"""The workloads a what-if replays: a window of what sync recorded, or a
scenario file's stream."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cluster.models import TRANSITION_ORDER, EventType, WorkloadEvent, WorkloadRecord, WorkloadState
from cluster.pace import EVICTION_DELAY_SECONDS, REQUEUE_DELAY_SECONDS
from cluster.rollups import hour_of
from cluster.state import pod_set
from jobs.models import JobRequest
from queues.engine.experiment import workload_stream
from queues.engine.model import PodSet, Policy, Workload
from queues.engine.scenario import Scenario
from queues.engine.simulator import WorkloadRecord as Measured
from whatif.proposal import DEFAULT_RUNTIME_SECONDS

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
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

# ---------------------------------------------------------------- the stream


@dataclass
class Stream:
    """A replayable workload stream: ``build()`` returns fresh engine workloads
    (the simulator changes them), the same every call. ``count`` is how many
    are measured; ``context`` names the others (work already running or
    queued when a window opened), ``horizon`` is where the clock stops (a
    window's end, in seconds from its start)."""

    build: Callable[[], list[tuple[Workload, str]]]
    count: int
    runtime_sources: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    horizon: float | None = None
    context: frozenset[str] = frozenset()
    eviction_delay: float = EVICTION_DELAY_SECONDS
    requeue_delay: float = REQUEUE_DELAY_SECONDS
    # What the cluster did with the measured workloads, per ClusterQueue, as
    # engine records (created, first admitted), for the "recorded" figures.
    recorded: list[Measured] = field(default_factory=list)
    # How long each workload's admission checks took on the cluster (infinity:
    # still unanswered); the others' are answered at once.
    check_delays: dict[str, float] = field(default_factory=dict)
    # A window's start (time 0 of the replay), and the part of it the
    # dashboard's hourly rollups cover exactly (see ``dashboard_hours``).
    start: datetime | None = None
    hours: tuple[datetime, datetime] | None = None


def dashboard_hours(start: datetime, stop: datetime) -> tuple[datetime, datetime] | None:
    """The part of [start, stop) the dashboard's hourly wait rollups can speak
    for: from the first whole hour in it (a rollup cannot be split before it)
    to its end. None when that is empty."""
    first = hour_of(start) if start == hour_of(start) else hour_of(start) + HOUR
    return (first, stop) if first < stop else None


def window_records(start: datetime, end: datetime) -> Any:
    return WorkloadRecord.objects.filter(created_at__gte=start, created_at__lt=end)


@dataclass
class _Declared:
    expected: int | None = None
    limit: int | None = None
    checkpoint: int | None = None


def _declared(*workloads: Any) -> dict[int, _Declared]:
    """What Berth's jobs declared, for the workloads of these querysets."""
    found: dict[int, _Declared] = {}
    for rows in workloads:
        for workload_id, expected, limit, checkpoint in JobRequest.objects.filter(
            workload__in=rows.values("pk")
        ).values_list(
            "workload_id",
            "expected_runtime_seconds",
            "max_runtime_seconds",
            "checkpoint_interval_seconds",
        ):
            found[workload_id] = _Declared(expected, limit, checkpoint)
    return found


def _check_delays(rows: Any) -> dict[int, float]:
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


def _first_admissions(rows: Any) -> dict[int, datetime]:
    """When each workload of ``rows`` was first admitted (its first Admitted
    transition)."""
    first: dict[int, datetime] = {}
    events = WorkloadEvent.objects.filter(workload__in=rows.values("pk"), type=EventType.ADMITTED)
    for workload_id, at in events.order_by("at").values_list("workload_id", "at"):
        first.setdefault(workload_id, at)
    return first


@dataclass
class _AtStart:
    """A workload created before the window that had not gone when it opened."""

    row: WorkloadRecord
    admitted: datetime | None  # the run that held quota when the window opened
    released: datetime | None  # when that run ended (finished, evicted, deleted)
    release_kind: str = ""


def _live_before(start: datetime) -> Any:
    return (
        WorkloadRecord.objects.filter(created_at__lt=start)
        .exclude(finished_at__lte=start)
        # Gone for good before the window opened: their last write was before it.
        .exclude(state__in=(WorkloadState.DELETED, WorkloadState.DEACTIVATED), synced_at__lte=start)
    )


def _carried_over(start: datetime) -> list[_AtStart]:
    """Workloads running or queued when the window opened, from the event log:
    their last transition before ``start`` says which (holding quota, or
    waiting), the first release after it when a running one gave its quota back."""
    candidates = _live_before(start)
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
            found.append(_AtStart(row, last[0], *(released if released else (None, ""))))
        else:
            found.append(_AtStart(row, None, None))
    return found


def _assignment(row: WorkloadRecord, policy: Policy) -> dict[str, dict[str, str]] | None:
    """The flavors the workload holds, if the policy still offers them."""
    if not row.flavors:
        return None
    queue = policy.cluster_queues[row.cluster_queue]
    offered = {
        (quotas.flavor, resource)
        for group in queue.resource_groups
        for quotas in group.flavors
        for resource in group.covered_resources
    }
    assignment = {str(k): {str(r): str(f) for r, f in v.items()} for k, v in row.flavors.items()}
    if any((f, r) not in offered for v in assignment.values() for r, f in v.items()):
        return None
    return assignment


def recorded_stream(
    start: datetime,
    end: datetime,
    policy: Policy,
    *,
    observed: datetime | None = None,
    speedup: float = 1.0,
    eviction_delay: float = EVICTION_DELAY_SECONDS,
    requeue_delay: float = REQUEUE_DELAY_SECONDS,
) -> Stream:
    """The workloads created in [start, end), on a clock starting at ``start``
    and stopping at ``end`` (or ``observed``, the moment the run reads the
    records, if earlier), with the workloads running or queued when the window
    opened as context.

    Runtime, in the cluster's seconds: finished − admitted when sync saw both;
    for a workload still running, at least as long as it had run by
    ``observed``; else the job's expected (or maximum) runtime when it is a
    Berth job; else DEFAULT_RUNTIME_SECONDS. Declared runtimes and the default
    are work: a simulated cluster does ``speedup`` seconds of it per second.
    ``eviction_delay``: how long a victim keeps its quota while its job stops;
    ``requeue_delay``: how long parked workloads wait after capacity frees.
    """
    observed = observed or end
    stop = min(end, observed)
    horizon = (stop - start).total_seconds()
    window = window_records(start, end)
    rows = list(window.order_by("created_at", "id"))
    carried = _carried_over(start)
    declared = _declared(window, _live_before(start))
    first = _first_admissions(window)
    delays = {**_check_delays(_live_before(start)), **_check_delays(window)}
    check_delays: dict[str, float] = {}
    template: list[tuple[Workload, str]] = []
    recorded: list[Measured] = []
    context: set[str] = set()
    sources = {"recorded": 0, "running": 0, "job": 0, "default": 0}
    skipped = {"unknown_queue": 0, "never_ran": 0}
    names: set[str] = set()
    checks = 0

    def wall(seconds: float) -> float:
        return seconds / speedup

    def runtime_of(row: WorkloadRecord, job: _Declared, count: bool = True) -> float:
        def source(name: str) -> None:
            if count:
                sources[name] += 1

        if row.admitted_at is not None and row.finished_at is not None:
            source("recorded")
            return max(0.0, (row.finished_at - row.admitted_at).total_seconds())
        if row.admitted_at is not None and row.state == WorkloadState.DELETED:
            source("recorded")  # deleted while it ran: its last write is the deletion
            return max(0.0, (row.synced_at - row.admitted_at).total_seconds())
        guess = wall(float(job.expected or job.limit or DEFAULT_RUNTIME_SECONDS))
        if row.admitted_at is not None and row.state in (
            WorkloadState.ADMITTED,
            WorkloadState.EVICTED,
        ):
            source("running")
            ran = max(0.0, (observed - row.admitted_at).total_seconds())
            return max(ran, guess)
        source("job" if job.expected or job.limit else "default")
        return guess

    def engine_workload(
        row: WorkloadRecord, runtime: float, job: _Declared, **extra: Any
    ) -> Workload:
        key = f"{row.namespace}/{row.name}"
        name = row.name if key not in names else f"{row.name}#{row.pk}"
        names.add(f"{row.namespace}/{name}")
        pod_sets = tuple(pod_set(p) for p in row.pod_sets) or (
            PodSet("main", 1, {str(k): int(v) for k, v in row.requested.items()}),
        )
        return Workload(
            name=name,
            namespace=row.namespace,
            cluster_queue=row.cluster_queue,
            local_queue=row.local_queue,
            pod_sets=pod_sets,
            priority=row.priority,
            creation_time=(row.created_at - start).total_seconds(),
            runtime=runtime,
            checkpoint_interval=wall(float(job.checkpoint)) if job.checkpoint else None,
            # Kueue deactivates it past its max runtime (the job's max-exec-time label).
            max_execution_time=wall(float(job.limit)) if job.limit else None,
            **extra,
        )

    for at_start in carried:
        row = at_start.row
        if row.cluster_queue not in policy.cluster_queues:
            continue
        job = declared.get(row.pk, _Declared())
        extra: dict[str, Any] = {}
        runtime = runtime_of(row, job, count=False)
        assignment = _assignment(row, policy) if at_start.admitted is not None else None
        if at_start.admitted is not None:
            # It runs from the window's start until its run ended as recorded (or,
            # still running, at least until now); evicted then, it had work left:
            # as much as it ran after, or its declared runtime.
            until = at_start.released or max(observed, stop)
            left = (until - start).total_seconds()
            if at_start.released is not None and at_start.release_kind not in GONE:
                left += runtime_of(row, job, count=False)
            runtime = max(0.0, left)
            if assignment is not None:
                runtime += (start - at_start.admitted).total_seconds()
                extra = {
                    "admission": assignment,
                    "admitted_at": (at_start.admitted - start).total_seconds(),
                }
            # else: where it ran is unknown, it takes what it has left at once
        workload = engine_workload(row, runtime, job, **extra)
        context.add(workload.key)
        if row.pk in delays:
            check_delays[workload.key] = delays[row.pk]
        template.append((workload, row.priority_class or "no priority class"))

    for row in rows:
        if row.cluster_queue not in policy.cluster_queues:
            skipped["unknown_queue"] += 1
            continue
        if row.admitted_at is None and (
            row.finished_at is not None
            or row.state in (WorkloadState.DELETED, WorkloadState.DEACTIVATED)
        ):
            skipped["never_ran"] += 1  # deleted or deactivated while it waited
            continue
        job = declared.get(row.pk, _Declared())
        workload = engine_workload(row, runtime_of(row, job), job)
        template.append((workload, row.priority_class or "no priority class"))
        if row.pk in delays:
            check_delays[workload.key] = delays[row.pk]
        checks += bool(row.admission_checks)
        # Its first Admitted transition (the record keeps only the last).
        admitted = first.get(row.pk) or row.admitted_at
        recorded.append(
            Measured(
                workload.key,
                row.cluster_queue,
                row.priority_class or "no priority class",
                row.priority,
                workload.creation_time,
                0,
                # Admitted from the window's end on: not in [start, stop).
                first_admitted=(
                    (admitted - start).total_seconds() if admitted and admitted < stop else None
                ),
            )
        )
    count = len(template) - len(context)
    notes = []
    if speedup != 1:
        notes.append(
            f"The simulated cluster runs jobs {speedup:g}× faster than real time: declared "
            f"runtimes (and the default) are divided by {speedup:g}, as it did."
        )
    if sources["running"]:
        notes.append(
            f"{sources['running']} workload(s) were still running: each runs at least as long as "
            "it had run (or its job's expected runtime, if longer)."
        )
    if sources["job"]:
        notes.append(
            f"{sources['job']} workload(s) had not run yet: they run for their job's expected "
            "(or maximum) runtime."
        )
    if sources["default"]:
        notes.append(
            f"{sources['default']} workload(s) had no recorded or declared runtime: they run for "
            f"{DEFAULT_RUNTIME_SECONDS / 3600:g} h of work"
            + (f" ({wall(DEFAULT_RUNTIME_SECONDS) / 60:g} min here)." if speedup != 1 else ".")
        )
    if skipped["unknown_queue"]:
        notes.append(
            f"{skipped['unknown_queue']} workload(s) left out: their ClusterQueue is no longer "
            "in the policy."
        )
    if skipped["never_ran"]:
        notes.append(
            f"{skipped['never_ran']} workload(s) left out: they were deleted or deactivated "
            "before they were admitted."
        )
    notes.append(
        "The replay stops at the window's end: a workload not admitted by then counts as "
        "never admitted, and as waiting until then (at least)."
    )
    if context:
        notes.append(
            f"{len(context)} workload(s) running or queued when the window opened take their "
            "quota and their place in the queue, as they did, but are not counted."
        )
    notes.append(
        "Preempted work is lost back to the last checkpoint (the job's checkpoint interval; "
        "everything without one)."
    )
    if stop < end:
        notes.append(f"The window ends after this run started: it is replayed until {stop:%H:%M}.")
    if checks:
        unanswered = sum(1 for delay in check_delays.values() if math.isinf(delay))
        notes.append(
            f"{checks} workload(s) had admission checks (approvals): once it holds quota, each "
            "waits for them as long as it did on the cluster"
            + (f" ({unanswered} still unanswered: until the end)" if unanswered else "")
            + "; one the cluster never got that far with is answered at once."
        )
    return Stream(
        build=lambda: copy.deepcopy(template),
        count=count,
        runtime_sources=sources,
        skipped=skipped,
        notes=notes,
        horizon=horizon,
        context=frozenset(context),
        eviction_delay=eviction_delay,
        requeue_delay=requeue_delay,
        recorded=recorded,
        check_delays=check_delays,
        start=start,
        hours=dashboard_hours(start, stop),
    )


def scenario_size(scenario: Scenario) -> int:
    """How many workloads the scenario's stream has, without generating them."""
    generated = sum(c.count_per_queue * len(c.cluster_queues) for c in scenario.classes)
    return len(scenario.workloads) + generated


def scenario_stream(scenario: Scenario) -> Stream:
    return Stream(
        build=lambda: workload_stream(scenario),
        count=scenario_size(scenario),
        eviction_delay=scenario.timing.eviction_delay,
        requeue_delay=scenario.timing.requeue_delay,
        notes=[
            "The scenario's workload stream (its explicit workloads and generated classes, "
            "with its seed) replays under both policies. A workload never admitted counts as "
            "waiting until the last workload finished (at least)."
        ],
    )
