"""The workloads a what-if replays: a window of what sync recorded, or a
scenario file's stream."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cluster.models import WorkloadRecord, WorkloadState
from cluster.pace import EVICTION_DELAY_SECONDS, REQUEUE_DELAY_SECONDS
from cluster.rollups import hour_of
from cluster.state import pod_set
from queues.engine.experiment import workload_stream
from queues.engine.model import PodSet, Policy, Workload
from queues.engine.scenario import Scenario
from queues.engine.simulator import WorkloadRecord as Measured
from whatif.proposal import DEFAULT_RUNTIME_SECONDS
from whatif.window_history import (
    CHUNK_SIZE,
    GONE,
    HOLDS,
    RELEASES,
    AtStart,
    Declared,
    admission_check_delays,
    carried_over,
    first_admissions,
    job_declarations,
    live_before,
)

__all__ = [
    "CHUNK_SIZE",
    "GONE",
    "HOLDS",
    "HOUR",
    "RELEASES",
    "Stream",
    "dashboard_hours",
    "recorded_stream",
    "scenario_size",
    "scenario_stream",
    "window_records",
    "window_rows",
]

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)

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


def window_rows(
    start: datetime, end: datetime, chunk_size: int = CHUNK_SIZE
) -> Iterator[WorkloadRecord]:
    """The workloads created in [start, end), oldest first, ``chunk_size`` at a
    time from a server-side cursor (on PostgreSQL): a window of any size is
    never in memory as rows all at once."""
    window = window_records(start, end).order_by("created_at", "id")
    yield from window.iterator(chunk_size=chunk_size)


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


@dataclass
class _Replay:
    """One window's replay as it is put together: its clock, and the engine
    workloads, cluster records and counts gathered so far."""

    start: datetime
    stop: datetime
    observed: datetime
    speedup: float
    template: list[tuple[Workload, str]] = field(default_factory=list)
    recorded: list[Measured] = field(default_factory=list)
    context: set[str] = field(default_factory=set)
    check_delays: dict[str, float] = field(default_factory=dict)
    sources: dict[str, int] = field(
        default_factory=lambda: {"recorded": 0, "running": 0, "job": 0, "default": 0}
    )
    skipped: dict[str, int] = field(default_factory=lambda: {"unknown_queue": 0, "never_ran": 0})
    names: set[str] = field(default_factory=set)
    checks: int = 0

    def wall(self, seconds: float) -> float:
        return seconds / self.speedup

    def runtime_of(self, row: WorkloadRecord, job: Declared, count: bool = True) -> float:
        def source(name: str) -> None:
            if count:
                self.sources[name] += 1

        if row.admitted_at is not None and row.finished_at is not None:
            source("recorded")
            return max(0.0, (row.finished_at - row.admitted_at).total_seconds())
        if row.admitted_at is not None and row.state == WorkloadState.DELETED:
            source("recorded")  # deleted while it ran: its last write is the deletion
            return max(0.0, (row.synced_at - row.admitted_at).total_seconds())
        guess = self.wall(float(job.expected or job.limit or DEFAULT_RUNTIME_SECONDS))
        if row.admitted_at is not None and row.state in (
            WorkloadState.ADMITTED,
            WorkloadState.EVICTED,
        ):
            source("running")
            ran = max(0.0, (self.observed - row.admitted_at).total_seconds())
            return max(ran, guess)
        source("job" if job.expected or job.limit else "default")
        return guess

    def engine_workload(
        self, row: WorkloadRecord, runtime: float, job: Declared, **extra: Any
    ) -> Workload:
        key = f"{row.namespace}/{row.name}"
        name = row.name if key not in self.names else f"{row.name}#{row.pk}"
        self.names.add(f"{row.namespace}/{name}")
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
            creation_time=(row.created_at - self.start).total_seconds(),
            runtime=runtime,
            checkpoint_interval=self.wall(float(job.checkpoint)) if job.checkpoint else None,
            # Kueue deactivates it past its max runtime (the job's max-exec-time label).
            max_execution_time=self.wall(float(job.limit)) if job.limit else None,
            **extra,
        )


def _add_carried_over(
    replay: _Replay,
    carried: Iterable[AtStart],
    policy: Policy,
    declared: dict[int, Declared],
    delays: dict[int, float],
) -> None:
    """The workloads running or queued when the window opened, as context: they
    hold their quota and their place, but are not measured."""
    start = replay.start
    for at_start in carried:
        row = at_start.row
        if row.cluster_queue not in policy.cluster_queues:
            continue
        job = declared.get(row.pk, Declared())
        extra: dict[str, Any] = {}
        runtime = replay.runtime_of(row, job, count=False)
        assignment = _assignment(row, policy) if at_start.admitted is not None else None
        if at_start.admitted is not None:
            # It runs from the window's start until its run ended as recorded (or,
            # still running, at least until now); evicted then, it had work left:
            # as much as it ran after, or its declared runtime.
            until = at_start.released or max(replay.observed, replay.stop)
            left = (until - start).total_seconds()
            if at_start.released is not None and at_start.release_kind not in GONE:
                left += replay.runtime_of(row, job, count=False)
            runtime = max(0.0, left)
            if assignment is not None:
                runtime += (start - at_start.admitted).total_seconds()
                extra = {
                    "admission": assignment,
                    "admitted_at": (at_start.admitted - start).total_seconds(),
                }
            # else: where it ran is unknown, it takes what it has left at once
        workload = replay.engine_workload(row, runtime, job, **extra)
        replay.context.add(workload.key)
        if row.pk in delays:
            replay.check_delays[workload.key] = delays[row.pk]
        replay.template.append((workload, row.priority_class or "no priority class"))


def _add_window(
    replay: _Replay,
    rows: Iterable[WorkloadRecord],
    policy: Policy,
    declared: dict[int, Declared],
    first: dict[int, datetime],
    delays: dict[int, float],
) -> None:
    """The workloads created in the window, measured: each with what the
    cluster recorded for it beside."""
    start, stop = replay.start, replay.stop
    for row in rows:
        if row.cluster_queue not in policy.cluster_queues:
            replay.skipped["unknown_queue"] += 1
            continue
        if row.admitted_at is None and (
            row.finished_at is not None
            or row.state in (WorkloadState.DELETED, WorkloadState.DEACTIVATED)
        ):
            replay.skipped["never_ran"] += 1  # deleted or deactivated while it waited
            continue
        job = declared.get(row.pk, Declared())
        workload = replay.engine_workload(row, replay.runtime_of(row, job), job)
        replay.template.append((workload, row.priority_class or "no priority class"))
        if row.pk in delays:
            replay.check_delays[workload.key] = delays[row.pk]
        replay.checks += bool(row.admission_checks)
        # Its first Admitted transition (the record keeps only the last).
        admitted = first.get(row.pk) or row.admitted_at
        replay.recorded.append(
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


def _runtime_notes(replay: _Replay) -> list[str]:
    """What the replay assumed about how long the workloads run, and which it left out."""
    sources, skipped, speedup = replay.sources, replay.skipped, replay.speedup
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
            + (
                f" ({replay.wall(DEFAULT_RUNTIME_SECONDS) / 60:g} min here)."
                if speedup != 1
                else "."
            )
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
    return notes


def _window_notes(replay: _Replay, end: datetime) -> list[str]:
    """How the replay treats the window's edges, preemption and admission checks."""
    notes = [
        "The replay stops at the window's end: a workload not admitted by then counts as "
        "never admitted, and as waiting until then (at least)."
    ]
    if replay.context:
        notes.append(
            f"{len(replay.context)} workload(s) running or queued when the window opened take "
            "their quota and their place in the queue, as they did, but are not counted."
        )
    notes.append(
        "Preempted work is lost back to the last checkpoint (the job's checkpoint interval; "
        "everything without one)."
    )
    if replay.stop < end:
        notes.append(
            f"The window ends after this run started: it is replayed until {replay.stop:%H:%M}."
        )
    if replay.checks:
        unanswered = sum(1 for delay in replay.check_delays.values() if math.isinf(delay))
        notes.append(
            f"{replay.checks} workload(s) had admission checks (approvals): once it holds quota, "
            "each waits for them as long as it did on the cluster"
            + (f" ({unanswered} still unanswered: until the end)" if unanswered else "")
            + "; one the cluster never got that far with is answered at once."
        )
    return notes


def recorded_stream(
    start: datetime,
    end: datetime,
    policy: Policy,
    *,
    observed: datetime | None = None,
    speedup: float = 1.0,
    eviction_delay: float = EVICTION_DELAY_SECONDS,
    requeue_delay: float = REQUEUE_DELAY_SECONDS,
    chunk_size: int = CHUNK_SIZE,
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
    Rows are read ``chunk_size`` at a time: what stays in memory is the
    replay's own compact workloads, not the window's records.
    """
    observed = observed or end
    stop = min(end, observed)
    window, before = window_records(start, end), live_before(start)
    declared = job_declarations(window, before, chunk_size=chunk_size)
    first = first_admissions(window, chunk_size=chunk_size)
    delays = {
        **admission_check_delays(before, chunk_size=chunk_size),
        **admission_check_delays(window, chunk_size=chunk_size),
    }
    replay = _Replay(start, stop, observed, speedup)
    # Both consume their rows as the cursors hand them over.
    carried = carried_over(start, chunk_size=chunk_size)
    _add_carried_over(replay, carried, policy, declared, delays)
    _add_window(replay, window_rows(start, end, chunk_size), policy, declared, first, delays)
    template = replay.template
    return Stream(
        build=lambda: [(workload.copied(), label) for workload, label in template],
        count=len(template) - len(replay.context),
        runtime_sources=replay.sources,
        skipped=replay.skipped,
        notes=_runtime_notes(replay) + _window_notes(replay, end),
        horizon=(stop - start).total_seconds(),
        context=frozenset(replay.context),
        eviction_delay=eviction_delay,
        requeue_delay=requeue_delay,
        recorded=replay.recorded,
        check_delays=replay.check_delays,
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
