"""What-if runs: a window of recorded workloads (or a scenario file) replayed
by the admission engine under today's policy and under a proposed change of
it, side by side. Written by ``whatif`` only (the page creates a run,
the Celery task ``jobs.tasks.run_whatif`` fills it in).

Its tables keep the ``jobs_`` names they had before ``jobs/`` was split
(``db_table``), so the split moved no data."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class WhatIfState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class WhatIfSource(models.TextChoices):
    WINDOW = "window", "Recorded workloads in a window"
    SCENARIO = "scenario", "A scenario file"


class WhatIfRun(models.Model):
    """One comparison. ``baseline`` is the policy as it was when the run was
    asked for (a scenario-shaped document), so a later policy change does not
    change what "today" meant; ``changes`` are the proposal's edits to it:
    ``[{cluster_queue, field, flavor, resource, value}]``. ``result`` holds the
    figures per ClusterQueue for today and the proposal, plus totals."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="whatif_runs"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    state = models.CharField(
        max_length=16, choices=WhatIfState.choices, default=WhatIfState.QUEUED, db_index=True
    )
    source = models.CharField(max_length=16, choices=WhatIfSource.choices)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    scenario = models.TextField(blank=True)
    baseline = models.JSONField(default=dict, blank=True)
    policy_version = models.BigIntegerField(null=True, blank=True)
    changes = models.JSONField(default=list, blank=True)
    workloads = models.PositiveIntegerField(default=0, help_text="in the replayed stream")
    progress = models.PositiveSmallIntegerField(default=0, help_text="percent, 0-100")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="last progress written")
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "jobs_whatifrun"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"what-if #{self.pk} ({self.state})"

    @property
    def done(self) -> bool:
        return self.state in (WhatIfState.SUCCEEDED, WhatIfState.FAILED)


class CapacityPlan(models.Model):
    """One capacity plan: how many GPUs of each flavor so that each target
    (the p-th percentile wait of a queue class or ClusterQueue at most so
    long) holds, by replaying a window of recorded workloads (or a scenario)
    with the flavor's capacity stepped in whole nodes (see
    ``queues.engine.capacity_search``). ``baseline`` is the policy as it was
    when the plan was asked for; ``request`` the checked targets, flavors,
    groups (queue class -> ClusterQueues), seeds and growth; ``result`` the
    answers and curves per flavor. The page or the API creates it, the Celery
    task ``whatif.tasks.run_capacity_plan`` fills it in."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="capacity_plans",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    state = models.CharField(
        max_length=16, choices=WhatIfState.choices, default=WhatIfState.QUEUED, db_index=True
    )
    source = models.CharField(max_length=16, choices=WhatIfSource.choices)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True)
    scenario = models.TextField(blank=True)
    baseline = models.JSONField(default=dict, blank=True)
    policy_version = models.BigIntegerField(null=True, blank=True)
    request = models.JSONField(default=dict, blank=True)
    workloads = models.PositiveIntegerField(default=0, help_text="in the replayed stream")
    progress = models.PositiveSmallIntegerField(default=0, help_text="percent, 0-100")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="last progress written")
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"capacity plan #{self.pk} ({self.state})"

    @property
    def done(self) -> bool:
        return self.state in (WhatIfState.SUCCEEDED, WhatIfState.FAILED)
