"""A quota grant: extra quota for one team's ClusterQueue until a moment.

While active, the policy holds the grant's changes; ``applied`` lists them as
deltas (``[{cluster_queue, flavor, resource, field, delta}]``) so the revert
takes back exactly what the grant added, and an admin's edit of the same quota
meanwhile survives it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from queues.models import Team
from whatif.models import WhatIfRun

GPU = "nvidia.com/gpu"


class GrantKind(models.TextChoices):
    NOMINAL = "nominal", "Nominal quota (+amount)"
    BORROWING = "borrowing", "Borrowing limit (+amount)"
    LOAN = "loan", "Loan from a lender ClusterQueue (its nominal quota moves)"


class GrantState(models.TextChoices):
    PENDING = "pending", "Pending (waiting for an approver)"
    ACTIVE = "active", "Active (applied to the policy)"
    REJECTED = "rejected"
    ENDED = "ended", "Ended (reverted)"
    EXPIRED = "expired", "Expired (nobody decided before its end)"


class QuotaGrant(models.Model):
    """One ask for extra quota, its decision, and what it did to the policy."""

    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="quota_grants"
    )
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="quota_grants_requested",
    )
    cluster_queue = models.CharField(max_length=253, db_index=True)
    kind = models.CharField(max_length=16, choices=GrantKind.choices)
    # For a loan: the ClusterQueue whose nominal quota moves to ``cluster_queue``.
    lender = models.CharField(max_length=253, blank=True)
    flavor = models.CharField(max_length=253)
    resource = models.CharField(max_length=317, default=GPU)
    # Canonical units (GPU count, milli-CPU, bytes).
    amount = models.BigIntegerField()
    justification = models.TextField()
    created_at = models.DateTimeField(db_index=True)
    ends_at = models.DateTimeField()

    state = models.CharField(
        max_length=16, choices=GrantState.choices, default=GrantState.PENDING, db_index=True
    )
    # What it does to others (grants.impact), computed at the request and
    # again at approval: whose lendable capacity shrinks, who would be preempted.
    impact = models.JSONField(default=dict, blank=True)
    # The what-if replay of the grant's changes (the others' waits).
    whatif_run = models.ForeignKey(
        WhatIfRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="quota_grants"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="quota_grants_decided",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # The approver's comment, or the reason for a rejection (required then).
    comment = models.TextField(blank=True)
    decision_key = models.CharField(max_length=64, blank=True)
    # The approver was shown workloads the grant would preempt and went on.
    acknowledged_preemption = models.BooleanField(default=False)
    applied = models.JSONField(default=list, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="quota_grants_ended",
    )
    end_reason = models.TextField(blank=True)
    # What the revert did per delta (taken back, or left alone and why).
    reverted = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="grant_amount_positive"),
        ]
        indexes = [models.Index(fields=["state", "ends_at"])]

    def __str__(self) -> str:
        return f"quota grant #{self.pk} {self.cluster_queue} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.state in (GrantState.PENDING, GrantState.ACTIVE)
