"""The four queue classes every Berth starts with (installed by a migration).

Plain data. Admins may edit them afterwards through the API; the migration only
creates the ones that are missing.
"""

from __future__ import annotations

from typing import Any

HOUR = 3600
DAY = 24 * HOUR

QUEUE_CLASS_TEMPLATES: list[dict[str, Any]] = [
    {
        "name": "interactive-dev",
        "description": "Notebooks and short debugging runs: short jobs, short waits. Newer "
        "work of equal priority may not preempt; lower priority may.",
        "queueing_strategy": "BestEffortFIFO",
        "within_cluster_queue": "LowerPriority",
        "reclaim_within_cohort": "Any",
        "borrow_within_cohort_policy": "Never",
        "requires_checkpoint": False,
        "requires_approval": False,
        "gang_required": False,
        "spot_allowed": False,
        "max_runtime_seconds": 8 * HOUR,
        "max_retries": 0,
    },
    {
        "name": "training-large",
        "description": "Multi-node distributed training: all pods start together (gang), "
        "strict order so big jobs are not starved by small ones, checkpoints required.",
        "queueing_strategy": "StrictFIFO",
        "within_cluster_queue": "LowerPriority",
        "reclaim_within_cohort": "Any",
        "borrow_within_cohort_policy": "Never",
        "requires_checkpoint": True,
        "requires_approval": False,
        "gang_required": True,
        "spot_allowed": False,
        "max_runtime_seconds": 14 * DAY,
        "max_retries": 3,
    },
    {
        "name": "eval-batch",
        "description": "Evaluation and batch inference: low priority, may run on spot "
        "capacity, retried after preemption, so checkpoints are required.",
        "queueing_strategy": "BestEffortFIFO",
        "within_cluster_queue": "LowerPriority",
        "reclaim_within_cohort": "LowerPriority",
        "borrow_within_cohort_policy": "Never",
        "requires_checkpoint": True,
        "requires_approval": False,
        "gang_required": False,
        "spot_allowed": True,
        "max_runtime_seconds": 2 * DAY,
        "max_retries": 10,
    },
    {
        "name": "urgent-release",
        "description": "Release-blocking work shared by all teams: very high priority, may "
        "preempt borrowed capacity across the cohort, every job needs an approver's yes.",
        "queueing_strategy": "BestEffortFIFO",
        "within_cluster_queue": "LowerPriority",
        "reclaim_within_cohort": "Any",
        "borrow_within_cohort_policy": "LowerPriority",
        "requires_checkpoint": False,
        "requires_approval": True,
        "gang_required": True,
        "spot_allowed": False,
        "max_runtime_seconds": 2 * DAY,
        "max_retries": 1,
    },
]
