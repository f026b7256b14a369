"""What Berth records about work on the cluster: the job requests teams submit
(``requests``) and what the cluster did with them (``workloads``, written by
sync only)."""

from jobs.models.requests import JobKind, JobRequest, JobState
from jobs.models.workloads import (
    CapacitySnapshot,
    EventType,
    QueueSnapshot,
    QueueStatus,
    SyncCursor,
    WorkloadEvent,
    WorkloadRecord,
    WorkloadState,
)

__all__ = [
    "CapacitySnapshot",
    "EventType",
    "JobKind",
    "JobRequest",
    "JobState",
    "QueueSnapshot",
    "QueueStatus",
    "SyncCursor",
    "WorkloadEvent",
    "WorkloadRecord",
    "WorkloadState",
]
