"""The workloads a what-if replays: a window of what sync recorded, or a
scenario file's stream."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobs.cluster_state import pod_set
from jobs.models import JobRequest, WorkloadRecord
from jobs.whatif.proposal import DEFAULT_RUNTIME_SECONDS
from queues.engine.experiment import workload_stream
from queues.engine.model import PodSet, Policy, Workload
from queues.engine.scenario import Scenario

log = logging.getLogger(__name__)

# ---------------------------------------------------------------- the stream


@dataclass
class Stream:
    """A replayable workload stream: ``build()`` returns fresh engine workloads
    (the simulator changes them), the same every call."""

    build: Callable[[], list[tuple[Workload, str]]]
    count: int
    runtime_sources: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def window_records(start: datetime, end: datetime) -> Any:
    return WorkloadRecord.objects.filter(created_at__gte=start, created_at__lt=end)


def recorded_stream(start: datetime, end: datetime, policy: Policy) -> Stream:
    """The workloads created in [start, end), on a clock starting at ``start``.
    Runtime: finished - admitted when sync saw both; else the job's expected
    (or maximum) runtime when it is a Berth job; else DEFAULT_RUNTIME_SECONDS."""
    jobs: dict[int, tuple[int | None, int | None, int | None]] = {}
    for workload_id, expected, limit, checkpoint in JobRequest.objects.filter(
        workload__created_at__gte=start, workload__created_at__lt=end
    ).values_list(
        "workload_id",
        "expected_runtime_seconds",
        "max_runtime_seconds",
        "checkpoint_interval_seconds",
    ):
        jobs[workload_id] = (expected, limit, checkpoint)
    template: list[tuple[Workload, str]] = []
    sources = {"recorded": 0, "job": 0, "default": 0}
    skipped = {"unknown_queue": 0, "never_ran": 0}
    names: set[str] = set()
    rows = window_records(start, end).order_by("created_at", "id")
    for row in rows.iterator(chunk_size=2000):
        if row.cluster_queue not in policy.cluster_queues:
            skipped["unknown_queue"] += 1
            continue
        if row.admitted_at is None and row.finished_at is not None:
            skipped["never_ran"] += 1  # deleted or deactivated while it waited
            continue
        expected, limit, checkpoint = jobs.get(row.pk, (None, None, None))
        if row.admitted_at is not None and row.finished_at is not None:
            runtime = max(0.0, (row.finished_at - row.admitted_at).total_seconds())
            sources["recorded"] += 1
        elif expected or limit:
            runtime = float(expected or limit or 0)
            sources["job"] += 1
        else:
            runtime = DEFAULT_RUNTIME_SECONDS
            sources["default"] += 1
        name = row.name if f"{row.namespace}/{row.name}" not in names else f"{row.name}#{row.pk}"
        names.add(f"{row.namespace}/{name}")
        pod_sets = tuple(pod_set(p) for p in row.pod_sets) or (
            PodSet("main", 1, {str(k): int(v) for k, v in row.requested.items()}),
        )
        workload = Workload(
            name=name,
            namespace=row.namespace,
            cluster_queue=row.cluster_queue,
            pod_sets=pod_sets,
            priority=row.priority,
            creation_time=(row.created_at - start).total_seconds(),
            runtime=runtime,
            checkpoint_interval=float(checkpoint) if checkpoint else None,
        )
        template.append((workload, row.priority_class or "no priority class"))
    notes = []
    if sources["job"]:
        notes.append(
            f"{sources['job']} workload(s) had not finished: they run for their job's expected "
            "(or maximum) runtime."
        )
    if sources["default"]:
        notes.append(
            f"{sources['default']} workload(s) had no recorded or declared runtime: they run for "
            f"{DEFAULT_RUNTIME_SECONDS / 3600:g} h."
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
        "The replay starts with an empty cluster: work already running or queued at the "
        "window's start is not in it. Preempted work is lost back to the last checkpoint "
        "(the job's checkpoint interval; everything without one)."
    )
    return Stream(
        build=lambda: copy.deepcopy(template),
        count=len(template),
        runtime_sources=sources,
        skipped=skipped,
        notes=notes,
    )


def scenario_size(scenario: Scenario) -> int:
    """How many workloads the scenario's stream has, without generating them."""
    generated = sum(c.count_per_queue * len(c.cluster_queues) for c in scenario.classes)
    return len(scenario.workloads) + generated


def scenario_stream(scenario: Scenario) -> Stream:
    return Stream(
        build=lambda: workload_stream(scenario),
        count=scenario_size(scenario),
        notes=[
            "The scenario's workload stream (its explicit workloads and generated classes, "
            "with its seed) replays under both policies."
        ],
    )
