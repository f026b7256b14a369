"""Approvals for queues whose class requires one (``urgent-release``): Berth is
the controller behind Kueue's AdmissionCheck ``berth-approval``. A request is
raised when Kueue reserves quota for a Workload and sets the check Pending; a
person decides it once; the decision lives here first and is then written to the
Workload's ``status.admissionChecks`` (``approvals.apply``).

Its tables keep the ``jobs_`` names they had before ``jobs/`` was split
(``db_table``), so the split moved no data."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from jobs.models.requests import JobRequest
from queues.models import Team


class ApprovalState(models.TextChoices):
    PENDING = "pending", "Pending (waiting for an approver)"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired", "Expired (rejected: nobody decided in time)"
    WITHDRAWN = "withdrawn", "Withdrawn (the workload left before a decision)"


DECIDED_STATES = frozenset({ApprovalState.APPROVED, ApprovalState.REJECTED, ApprovalState.EXPIRED})


class ApprovalAction(models.TextChoices):
    """What the audit trail records; one row per state change or side effect."""

    REQUESTED = "requested"
    NOTIFIED = "notified"
    NOTIFY_FAILED = "notify-failed", "Notification failed"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    REAPPROVED = "reapproved", "Re-approved (back within the grace window)"
    WITHDRAWN = "withdrawn"
    APPLIED = "applied", "Written to the Workload"
    APPLY_FAILED = "apply-failed", "Writing to the Workload failed (will be retried)"


class ApprovalRequest(models.Model):
    """One ask for a person's yes: a Workload, at one quota reservation. A
    workload that Kueue evicts and reserves again gets a new request (``attempt``
    + 1); an approved one is re-approved if it returns within the grace window."""

    workload_uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63)
    workload_name = models.CharField(max_length=253)
    cluster_queue = models.CharField(max_length=253, db_index=True)
    local_queue = models.CharField(max_length=63, blank=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    job = models.ForeignKey(
        JobRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals"
    )
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals"
    )
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approval_requests",
    )
    # {resource: canonical amount} for the whole workload
    requested = models.JSONField(default=dict)
    gpus = models.PositiveIntegerField(default=0)
    priority = models.IntegerField(default=0)
    priority_class = models.CharField(max_length=253, blank=True)
    justification = models.TextField(blank=True)
    # What approving costs, from the engine at request time (approvals.impact).
    impact = models.JSONField(default=dict)
    # The reservation this request answers (the Workload's QuotaReserved time):
    # a decision is written only while that reservation holds.
    reserved_at = models.DateTimeField(null=True, blank=True)

    state = models.CharField(
        max_length=16,
        choices=ApprovalState.choices,
        default=ApprovalState.PENDING,
        db_index=True,
    )
    created_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approval_decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # The approver's comment, or the reason for a rejection (required then).
    comment = models.TextField(blank=True)
    # The client's Idempotency-Key of the decision: the same POST again (an
    # answer lost on the way) is answered as the first, not as a conflict.
    decision_key = models.CharField(max_length=64, blank=True)
    # When the approvers were told (None: still to tell; the pass re-drives it).
    notified_at = models.DateTimeField(null=True, blank=True)
    # When the decision was seen on the Workload (None: still to write).
    applied_at = models.DateTimeField(null=True, blank=True)
    # Whether the Workload shows the decision (False: closed unwritten, because
    # the Workload left or the reservation it answered ended: superseded).
    written = models.BooleanField(default=False)
    apply_attempts = models.PositiveIntegerField(default=0)
    # Set for a request the controller re-approved itself (within the grace window).
    reapproval_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reapprovals"
    )

    class Meta:
        db_table = "jobs_approvalrequest"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload_uid", "attempt"], name="unique_approval_attempt"
            ),
            # One open request per Workload, however many controllers race to raise it.
            models.UniqueConstraint(
                fields=["workload_uid"],
                condition=Q(state="pending"),
                name="unique_pending_approval",
            ),
        ]
        indexes = [
            models.Index(fields=["state", "expires_at"]),
            models.Index(fields=["workload_uid", "-attempt"]),
        ]

    def __str__(self) -> str:
        return f"approval #{self.pk} {self.namespace}/{self.workload_name} ({self.state})"

    @property
    def workload_key(self) -> str:
        return f"{self.namespace}/{self.workload_name}"

    @property
    def window_minutes(self) -> int:
        """How long it had for a decision (its deadline, from when it was raised)."""
        return round((self.expires_at - self.created_at).total_seconds() / 60)

    @property
    def is_decided(self) -> bool:
        return self.state in DECIDED_STATES


class ApprovalEvent(models.Model):
    """The audit trail: who did what to a request, and when."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=16, choices=ApprovalAction.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approval_events",
    )
    at = models.DateTimeField(db_index=True)
    message = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "jobs_approvalevent"
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.request_id} {self.action} at {self.at:%Y-%m-%d %H:%M:%S}"
