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
    replay_inputs = models.BinaryField(
        default=b"", help_text="the search's request, pickled, while its replays are shared out"
    )
    inputs_signature = models.CharField(
        max_length=64, blank=True, help_text="HMAC-SHA256 of replay_inputs"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"capacity plan #{self.pk} ({self.state})"

    @property
    def done(self) -> bool:
        return self.state in (WhatIfState.SUCCEEDED, WhatIfState.FAILED)


class ReplayPartState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ReplayPart(models.Model):
    """One part of a what-if run's replays, shared out among the Celery
    workers (``whatif.scaleout``): some of the independent groups of both
    policies' replays, pickled (``replays``, signed with the secret key).
    Any worker claims it by compare-and-set (``token``), the run's own task
    too, so one worker is enough; a part whose worker fell silent is taken
    over. ``result`` is what its replays gave (``queues.engine.result_codec``
    JSON, by label then group) until the run merges them; then the inputs
    and results are dropped and the row stays as a record of who replayed
    what, for how long."""

    run = models.ForeignKey(WhatIfRun, on_delete=models.CASCADE, related_name="parts")
    index = models.PositiveSmallIntegerField()
    state = models.CharField(
        max_length=16, choices=ReplayPartState.choices, default=ReplayPartState.QUEUED
    )
    groups = models.JSONField(default=list, help_text="the independent groups it replays")
    workloads = models.PositiveIntegerField(default=0, help_text="in its replays")
    replays = models.BinaryField(default=b"", help_text="its replays, pickled and compressed")
    signature = models.CharField(max_length=64, blank=True, help_text="HMAC-SHA256 of replays")
    token = models.CharField(max_length=32, blank=True, help_text="the current claim")
    worker = models.CharField(max_length=255, blank=True, help_text="who replays it (replayed)")
    share = models.FloatField(default=0.0, help_text="how far it has come, 0-1")
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="wall time of its replay")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="whatif_replaypart_run_index")
        ]

    def __str__(self) -> str:
        return f"what-if #{self.run_id} part {self.index} ({self.state})"


class PlanReplay(models.Model):
    """One replay of a capacity plan's search shared out among the Celery
    workers (``whatif.plan_scaleout``): the flavor at so many GPUs, one seed.
    The plan's task queues the replay its search waits for and, while
    workers are free, those it may ask for next; any worker claims one by
    compare-and-set (``token``), the plan's own task too, and one whose
    worker fell silent is taken over. ``figures`` are its waits per group
    (JSON); ``asked`` says whether the search used them (a replay run ahead
    of a search that went the other way was not)."""

    plan = models.ForeignKey(CapacityPlan, on_delete=models.CASCADE, related_name="replays")
    flavor = models.CharField(max_length=253)
    gpus = models.IntegerField()
    seed = models.PositiveSmallIntegerField()
    state = models.CharField(
        max_length=16, choices=ReplayPartState.choices, default=ReplayPartState.QUEUED
    )
    asked = models.BooleanField(default=False, help_text="the search used its figures")
    token = models.CharField(max_length=32, blank=True, help_text="the current claim")
    worker = models.CharField(max_length=255, blank=True, help_text="who replays it (replayed)")
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="wall time of its replay")
    figures = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["plan", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["plan", "flavor", "gpus", "seed"], name="whatif_planreplay_point"
            )
        ]

    def __str__(self) -> str:
        return f"capacity plan #{self.plan_id}: {self.flavor} at {self.gpus} GPUs, seed {self.seed}"


class ReplayCheckpoint(models.Model):
    """What a part's replays showed at one milestone (``queues.engine.parts``):
    the run merges the parts' at the last milestone all have passed into its
    figures so far, then drops them."""

    part = models.ForeignKey(ReplayPart, on_delete=models.CASCADE, related_name="checkpoints")
    milestone = models.PositiveSmallIntegerField()
    at = models.FloatField(help_text="simulated seconds")
    figures = models.JSONField(help_text="result_codec JSON, by label then group")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["part", "milestone"], name="whatif_replaycheckpoint_part_milestone"
            )
        ]

    def __str__(self) -> str:
        return f"part {self.part_id} at milestone {self.milestone}"
