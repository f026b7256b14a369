"""What a replay keeps per workload (``WorkloadRecord``) and what it
returns (``SimulationResult``).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queues.engine.model import FlavorResource, Workload
from queues.engine.usage_meter import QueueRates, QueueTotals


@dataclass
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
