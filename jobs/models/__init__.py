"""What Berth records about work on the cluster: the job requests teams submit
(``requests``) and what the cluster did with them (``workloads``, written by
sync only)."""

from jobs.models.approvals import (
    DECIDED_STATES,
    ApprovalAction,
    ApprovalEvent,
    ApprovalRequest,
    ApprovalState,
)
from jobs.models.health import SyncStepHealth, SyncStepName
from jobs.models.requests import JobKind, JobRequest, JobState
from jobs.models.rollups import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    BorrowingRollup,
    FairShareRollup,
    PendingForecast,
    PreemptionRollup,
    TeamUsageSnapshot,
    WaitRollup,
)
from jobs.models.whatif import WhatIfRun, WhatIfSource, WhatIfState
from jobs.models.workloads import (
    TRANSITION_ORDER,
    CapacitySnapshot,
    EventType,
    ObservedNode,
    QueueSnapshot,
    QueueStatus,
    SyncCursor,
    WorkloadEvent,
    WorkloadRecord,
    WorkloadState,
)

__all__ = [
    "BUCKET_FIELDS",
    "DECIDED_STATES",
    "TRANSITION_ORDER",
    "WAIT_BUCKETS",
    "ApprovalAction",
    "ApprovalEvent",
    "ApprovalRequest",
    "ApprovalState",
    "BorrowingRollup",
    "CapacitySnapshot",
    "EventType",
    "FairShareRollup",
    "JobKind",
    "JobRequest",
    "JobState",
    "ObservedNode",
    "PendingForecast",
    "PreemptionRollup",
    "QueueSnapshot",
    "QueueStatus",
    "SyncCursor",
    "SyncStepHealth",
    "SyncStepName",
    "TeamUsageSnapshot",
    "WaitRollup",
    "WhatIfRun",
    "WhatIfSource",
    "WhatIfState",
    "WorkloadEvent",
    "WorkloadRecord",
    "WorkloadState",
]
