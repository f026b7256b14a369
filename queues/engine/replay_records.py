"""What a replay keeps per workload (``WorkloadRecord``), what it returns
(``SimulationResult``) and the frame it is measured in (``Frame``).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mypy_extensions import mypyc_attr

from queues.engine.frozen_copies import rebuilt_by_fields
from queues.engine.model import FlavorResource, Workload
from queues.engine.usage_meter import QueueRates, QueueTotals


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class WorkloadRecord:
    key: str
    cluster_queue: str
    workload_class: str
    priority: int
    created: float
    gpus: int
    first_admitted: float | None = None
    finished: float | None = None
    preemptions: int = 0
    preemptions_by_reason: dict[str, int] = field(default_factory=dict)
    lost_seconds: float = 0.0  # of runtime redone after preemptions
    lost_gpu_seconds: float = 0.0
    # False for context: work already there when the clock started, not measured.
    measured: bool = True
    # When it was deactivated for running past its maximum execution time.
    timed_out: float | None = None
    # waitForPodsReady: times its pods were not ready in time, and when it was
    # deactivated for exceeding the requeue limit.
    pods_ready_timeouts: int = 0
    requeue_limit_exceeded: float | None = None

    # Stated, not generated: made by the million (see queues.engine.compiled).
    def __init__(
        self,
        key: str,
        cluster_queue: str,
        workload_class: str,
        priority: int,
        created: float,
        gpus: int,
        first_admitted: float | None = None,
        finished: float | None = None,
        preemptions: int = 0,
        preemptions_by_reason: dict[str, int] | None = None,
        lost_seconds: float = 0.0,
        lost_gpu_seconds: float = 0.0,
        measured: bool = True,
        timed_out: float | None = None,
        pods_ready_timeouts: int = 0,
        requeue_limit_exceeded: float | None = None,
    ) -> None:
        self.key = key
        self.cluster_queue = cluster_queue
        self.workload_class = workload_class
        self.priority = priority
        self.created = created
        self.gpus = gpus
        self.first_admitted = first_admitted
        self.finished = finished
        self.preemptions = preemptions
        self.preemptions_by_reason = {} if preemptions_by_reason is None else preemptions_by_reason
        self.lost_seconds = lost_seconds
        self.lost_gpu_seconds = lost_gpu_seconds
        self.measured = measured
        self.timed_out = timed_out
        self.pods_ready_timeouts = pods_ready_timeouts
        self.requeue_limit_exceeded = requeue_limit_exceeded

    @property
    def wait(self) -> float | None:
        if self.first_admitted is None:
            return None
        return max(0.0, self.first_admitted - max(self.created, 0.0))

    def censored_wait(self, end: float) -> tuple[float, bool]:
        """(wait, censored): the time to admission, or, for a workload never
        admitted by ``end``, the time it had waited by then (a lower bound:
        right-censored)."""
        if self.first_admitted is not None and self.first_admitted <= end:
            return max(0.0, self.first_admitted - max(self.created, 0.0)), False
        return max(0.0, end - max(self.created, 0.0)), True


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class SimulationResult:
    start: float
    end: float
    records: dict[str, WorkloadRecord]
    totals: dict[str, QueueTotals]
    nominal: dict[str, dict[FlavorResource, int]]
    preemptions_by_reason: dict[str, int]
    preemptions_by_queue: dict[str, dict[str, int]]
    series: dict[str, Any]
    cycles: int
    admissions: int
    livelocks: int = 0
    # Where the clock was stopped (a what-if's window end), if it was.
    horizon: float | None = None
    # Every admission, re-admissions after an eviction included: (ClusterQueue,
    # when, wait since the workload was queued or requeued), as Berth's
    # dashboard counts them.
    admission_log: list[tuple[str, float, float]] = field(default_factory=list)
    # Per ClusterQueue, its usage rates at the end (queues.engine.split.merge
    # extends a group that ended early to the end of the whole replay).
    final_rates: dict[str, QueueRates] = field(default_factory=dict)

    @property
    def elapsed(self) -> float:
        return max(self.end - self.start, 1e-9)


def gpu_count(workload: Workload) -> int:
    return sum(p.count * p.requests.get("nvidia.com/gpu", 0) for p in workload.pod_sets)


def longest_run(workloads: Iterable[Workload]) -> float:
    """The longest finite run time (one that runs for ever sets no end)."""
    return max(
        (w.runtime or 0.0 for w in workloads if math.isfinite(w.runtime or 0.0)), default=1.0
    )


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class Frame:
    """Where a replay's clock starts, where it should end (the horizon, or
    roughly the last arrival plus the longest run), how often its charts
    sample and which resource they follow. The groups of a split replay are
    all given the whole replay's."""

    start: float
    expected_end: float
    sample_every: float
    main_resource: str


def frame_of(
    workloads: Iterable[Workload],
    *,
    start: float | None = None,
    horizon: float | None = None,
    samples: int = 240,
) -> Frame:
    """The frame of a replay of ``workloads``: the clock starts at ``start``
    (default: the first arrival, at 0 or later) and work created earlier
    arrives then; charts follow GPUs when any workload asks for them, else
    CPU cores."""
    stream = list(workloads)
    floor = start if start is not None else 0.0
    arrivals = [max(w.creation_time, floor) for w in stream]
    first = start if start is not None else min(arrivals, default=0.0)
    end = horizon if horizon is not None else max(arrivals, default=0.0) + longest_run(stream)
    return Frame(
        first,
        end,
        max((end - first) / max(samples, 1), 1e-3),
        "nvidia.com/gpu" if any(gpu_count(w) for w in stream) else "cpu",
    )


rebuilt_by_fields(Frame)
