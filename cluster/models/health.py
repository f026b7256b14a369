"""How each step of the periodic sync last went (``cluster.sync_steps``), for the
Overview's cluster health and ``/metrics``. One row per step.

Its tables keep the ``jobs_`` names they had before ``jobs/`` was split
(``db_table``), so the split moved no data."""

from __future__ import annotations

from django.db import models


class SyncStepName(models.TextChoices):
    """The sync's steps, in the order they run."""

    WORKLOADS = "workloads", "Workloads listed"
    QUEUE_STATUS = "queue_status", "Queue status mirrored"
    JOBS = "jobs", "Jobs followed"
    SNAPSHOTS = "snapshots", "Usage and capacity snapshots"
    FORECASTS = "forecasts", "Start forecasts"


class SyncStepHealth(models.Model):
    """The latest run of one sync step: when it ran, when it last succeeded, the
    error of its latest failure, and how many runs in a row have failed
    (0: the latest run succeeded)."""

    step = models.CharField(max_length=32, choices=SyncStepName.choices, unique=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_duration_seconds = models.FloatField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failures_total = models.PositiveBigIntegerField(default=0)

    class Meta:
        db_table = "jobs_syncstephealth"
        ordering = ["step"]

    def __str__(self) -> str:
        return f"sync step {self.step} ({'up' if self.up else 'failing'})"

    @property
    def up(self) -> bool:
        """Its latest run succeeded."""
        return self.last_run_at is not None and self.consecutive_failures == 0
