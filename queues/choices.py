"""Enumerations of the policy domain. Values are Kueue's API strings where Kueue has them."""

from __future__ import annotations

from django.db import models


class CapacityType(models.TextChoices):
    ON_DEMAND = "on-demand", "On-demand"
    SPOT = "spot", "Spot (preemptible by the provider)"


class QueueingStrategy(models.TextChoices):
    BEST_EFFORT_FIFO = "BestEffortFIFO", "BestEffortFIFO: skip a head that does not fit"
    STRICT_FIFO = "StrictFIFO", "StrictFIFO: nothing passes the head"


class WithinClusterQueue(models.TextChoices):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(models.TextChoices):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(models.TextChoices):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FungibilityAction(models.TextChoices):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(models.TextChoices):
    NONE = "", "(none)"
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class StopPolicy(models.TextChoices):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class PolicyKind(models.TextChoices):
    """The kinds of policy object whose changes are recorded in history."""

    TEAM = "team", "Team"
    TEAM_MEMBERSHIP = "team-membership", "Team membership"
    RESOURCE_FLAVOR = "resource-flavor", "ResourceFlavor"
    COHORT = "cohort", "Cohort"
    CLUSTER_QUEUE = "cluster-queue", "ClusterQueue"
    LOCAL_QUEUE = "local-queue", "LocalQueue"
    PRIORITY_CLASS = "priority-class", "WorkloadPriorityClass"
    QUEUE_CLASS = "queue-class", "Queue class"


class ChangeAction(models.TextChoices):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class TeamRole(models.TextChoices):
    MEMBER = "member"
    APPROVER = "approver"
