"""A team's request to run a training job: what they asked for, the exact
manifest Berth rendered for it, and where it is in its life. Written by
``jobs.services`` (submit, cancel) and by sync as the cluster moves it on."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from cluster.models.workloads import WorkloadRecord
from queues.models import Team


class JobKind(models.TextChoices):
    JOB = "Job", "Job (batch/v1, indexed)"
    JOBSET = "JobSet", "JobSet (jobset.x-k8s.io/v1alpha2)"
    PYTORCHJOB = "PyTorchJob", "PyTorchJob (kubeflow.org/v1)"
    TRAINJOB = "TrainJob", "TrainJob (trainer.kubeflow.org/v1alpha1)"


class JobState(models.TextChoices):
    SUBMITTED = "submitted", "Submitted (being created on the cluster)"
    QUEUED = "queued"
    QUOTA_RESERVED = "quota-reserved", "Quota reserved (waiting for admission checks)"
    ADMITTED = "admitted"
    RUNNING = "running"
    PREEMPTED = "preempted", "Preempted or evicted (stopping, then requeued)"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling", "Cancelling (being deleted from the cluster)"
    CANCELLED = "cancelled"
    REJECTED = "rejected", "Rejected (by the cluster, or by its approver)"


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.REJECTED}
)


class JobRequest(models.Model):
    """One submitted job. The record outlives the cluster object: a cancelled or
    finished job keeps its manifest, timeline and figures."""

    name = models.CharField(max_length=63)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="jobs")
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=16, choices=JobKind.choices, default=JobKind.JOB)
    image = models.CharField(max_length=512)
    command = models.JSONField(default=list)
    env = models.JSONField(default=dict, blank=True)
    nodes = models.PositiveIntegerField(default=1)
    gpus_per_node = models.PositiveIntegerField(default=0)
    cpu_per_node = models.BigIntegerField(null=True, blank=True, help_text="milli-CPU")
    memory_per_node = models.BigIntegerField(null=True, blank=True, help_text="bytes")
    queue_class = models.CharField(max_length=63, blank=True)
    local_queue = models.CharField(max_length=63)
    cluster_queue = models.CharField(max_length=63)
    priority_class = models.CharField(max_length=253, blank=True)
    priority = models.IntegerField(default=0)
    checkpoint_uri = models.CharField(max_length=1024, blank=True)
    checkpoint_interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    # How long the team expects it to run: start estimates of the jobs behind it.
    expected_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    retries = models.PositiveSmallIntegerField(default=0)
    spot_allowed = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True)
    justification = models.TextField(blank=True)
    training_runtime = models.CharField(max_length=253, blank=True)
    # Kueue's partial admission (kind Job) and topology-aware placement.
    min_nodes = models.PositiveIntegerField(null=True, blank=True)
    topology_required = models.CharField(max_length=317, blank=True)
    topology_preferred = models.CharField(max_length=317, blank=True)
    # The objects Berth creates, exactly as rendered (the job first).
    manifest = models.JSONField(default=list)

    state = models.CharField(
        max_length=16, choices=JobState.choices, default=JobState.SUBMITTED, db_index=True
    )
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    submitted_at = models.DateTimeField(db_index=True)
    created_on_cluster_at = models.DateTimeField(null=True, blank=True)
    cluster_uid = models.CharField(max_length=64, blank=True)
    create_attempts = models.PositiveSmallIntegerField(default=0)
    workload = models.ForeignKey(
        WorkloadRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    admitted_at = models.DateTimeField(null=True, blank=True, help_text="first admission")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    preemptions = models.PositiveIntegerField(default=0)
    gpu_seconds_used = models.FloatField(default=0.0)
    gpu_seconds_lost = models.FloatField(default=0.0, help_text="since the last checkpoint")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            # A name is free again once its job has ended (as on the cluster,
            # where the object is gone by then).
            models.UniqueConstraint(
                fields=["namespace", "name"],
                condition=~Q(state__in=sorted(s.value for s in TERMINAL_STATES)),
                name="unique_live_job_name",
            )
        ]
        indexes = [
            models.Index(fields=["team", "-submitted_at"]),
            models.Index(fields=["cluster_queue", "state"]),
            models.Index(fields=["namespace", "name"]),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.state})"

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def checkpoint_interval(self) -> float | None:
        """Seconds between its checkpoints (None: it keeps none, so a
        preemption loses all its work). Submit fills in the default interval."""
        if not self.checkpoint_uri or not self.checkpoint_interval_seconds:
            return None
        return float(self.checkpoint_interval_seconds)

    @property
    def wait_seconds(self) -> float | None:
        """Submitted to first admitted."""
        if self.admitted_at is None:
            return None
        return max(0.0, (self.admitted_at - self.submitted_at).total_seconds())
