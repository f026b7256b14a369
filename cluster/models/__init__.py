"""What Berth records of the cluster, written by sync only: workloads and their
events (``workloads``), hourly rollups and forecasts (``rollups``), and how
each sync step last went (``health``)."""

from cluster.models.gang_fit import GangFitSnapshot
from cluster.models.health import SyncStepHealth, SyncStepName
from cluster.models.rollups import (
    BUCKET_FIELDS,
    WAIT_BUCKETS,
    BorrowingRollup,
    FairShareRollup,
    OpenAllocation,
    PendingForecast,
    PreemptionLoss,
    PreemptionRollup,
    TeamBorrowingRollup,
    TeamBorrowingTotal,
    TeamUsageSnapshot,
    UsageRollup,
    WaitRollup,
)
from cluster.models.workloads import (
    LIVE_STATES,
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
    "LIVE_STATES",
    "TRANSITION_ORDER",
    "WAIT_BUCKETS",
    "BorrowingRollup",
    "CapacitySnapshot",
    "EventType",
    "FairShareRollup",
    "GangFitSnapshot",
    "ObservedNode",
    "OpenAllocation",
    "PendingForecast",
    "PreemptionLoss",
    "PreemptionRollup",
    "QueueSnapshot",
    "QueueStatus",
    "SyncCursor",
    "SyncStepHealth",
    "SyncStepName",
    "TeamBorrowingRollup",
    "TeamBorrowingTotal",
    "TeamUsageSnapshot",
    "UsageRollup",
    "WaitRollup",
    "WorkloadEvent",
    "WorkloadRecord",
    "WorkloadState",
]
