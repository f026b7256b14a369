from __future__ import annotations

from django.db import models

from queues.choices import (
    BorrowWithinCohortPolicy,
    QueueingStrategy,
    ReclaimWithinCohort,
    WithinClusterQueue,
)


class PolicyObject(models.Model):
    """Common bookkeeping of every policy object.

    ``revision`` counts saved changes; clients send it back in ``If-Match`` so a
    stale edit is refused instead of silently overwriting someone else's.
    """

    revision = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class QueueingPolicy(models.Model):
    """How a queue orders and preempts: shared by ClusterQueues and by the queue
    classes that supply their defaults."""

    queueing_strategy = models.CharField(
        max_length=32, choices=QueueingStrategy.choices, default=QueueingStrategy.BEST_EFFORT_FIFO
    )
    within_cluster_queue = models.CharField(
        max_length=32, choices=WithinClusterQueue.choices, default=WithinClusterQueue.NEVER
    )
    reclaim_within_cohort = models.CharField(
        max_length=32, choices=ReclaimWithinCohort.choices, default=ReclaimWithinCohort.NEVER
    )
    borrow_within_cohort_policy = models.CharField(
        max_length=32,
        choices=BorrowWithinCohortPolicy.choices,
        default=BorrowWithinCohortPolicy.NEVER,
    )

    class Meta:
        abstract = True
