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


class AdmissionMode(models.TextChoices):
    """A ClusterQueue's ``spec.admissionScope.admissionMode``; empty leaves the
    admission scope out (Kueue then orders by priority and time only)."""

    NONE = "", "(none)"
    USAGE_BASED = (
        "UsageBasedAdmissionFairSharing",
        "UsageBasedAdmissionFairSharing: LocalQueues that used less go first",
    )
    NO_FAIR_SHARING = (
        "NoAdmissionFairSharing",
        "NoAdmissionFairSharing: priority and arrival order only",
    )


class PreemptionStrategy(models.TextChoices):
    """One fair-sharing preemption strategy of Kueue's configuration."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


class PreemptionStrategies(models.TextChoices):
    """The lists of fair-sharing preemption strategies Kueue accepts, comma-joined
    in order (its configuration refuses any other list)."""

    FINAL_THEN_INITIAL = (
        "LessThanOrEqualToFinalShare,LessThanInitialShare",
        "LessThanOrEqualToFinalShare, then LessThanInitialShare (Kueue's default)",
    )
    FINAL_SHARE = "LessThanOrEqualToFinalShare", "LessThanOrEqualToFinalShare only"
    INITIAL_SHARE = "LessThanInitialShare", "LessThanInitialShare only"


class RequeuingTimestamp(models.TextChoices):
    """Which time orders a workload Kueue requeued after waitForPodsReady evicted it."""

    EVICTION = "Eviction", "Eviction: the time it was evicted"
    CREATION = "Creation", "Creation: the time it was created"


class PolicyKind(models.TextChoices):
    """The kinds of policy object whose changes are recorded in history."""

    TEAM = "team", "Team"
    TEAM_MEMBERSHIP = "team-membership", "Team membership"
    TOPOLOGY = "topology", "Topology"
    RESOURCE_FLAVOR = "resource-flavor", "ResourceFlavor"
    COHORT = "cohort", "Cohort"
    CLUSTER_QUEUE = "cluster-queue", "ClusterQueue"
    LOCAL_QUEUE = "local-queue", "LocalQueue"
    PRIORITY_CLASS = "priority-class", "WorkloadPriorityClass"
    QUEUE_CLASS = "queue-class", "Queue class"
    KUEUE_CONFIGURATION = "kueue-configuration", "Kueue configuration"


class ChangeAction(models.TextChoices):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class TeamRole(models.TextChoices):
    MEMBER = "member"
    APPROVER = "approver"
