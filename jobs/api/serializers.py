"""Job request shapes: what a submit accepts, and what a job looks like."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from berth_cli import durations
from cluster.models import WorkloadEvent
from jobs.models import JobKind, JobRequest
from queues.api.fields import KueueChoiceField, StrictSerializer
from queues.quantity import format_canonical


@extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string", "example": "1h30m"}]})
class DurationField(serializers.IntegerField):
    """Seconds, as a whole number or as text the ``berth`` CLI takes too:
    ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` (``berth_cli.durations``)."""

    default_error_messages = {"duration": "{message}"}

    def __init__(self, **kwargs: Any) -> None:
        # The limits in the units people type as well as in seconds.
        limits = {"min_value": "at least", "max_value": "at most"}
        messages = {
            key: f"must be {word} {durations.format_duration(kwargs[key])} ({{{key}}} s)"
            for key, word in limits.items()
            if kwargs.get(key) is not None
        }
        kwargs["error_messages"] = {**messages, **kwargs.get("error_messages", {})}
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not data.strip().isdigit():
            try:
                return durations.parse_duration(data)
            except durations.DurationError as exc:
                self.fail("duration", message=str(exc))
        return int(super().to_internal_value(data))


class JobSubmitSerializer(StrictSerializer):
    """Field names follow the CLI's flags (``--gpus-per-node`` → ``gpus_per_node``)."""

    name = serializers.CharField(max_length=253)
    team = serializers.CharField(required=False, allow_blank=True, max_length=63)
    namespace = serializers.CharField(required=False, allow_blank=True, max_length=63)
    kind = KueueChoiceField(choices=JobKind.values, default=JobKind.JOB)
    image = serializers.CharField(max_length=1024)
    command = serializers.ListField(child=serializers.CharField(allow_blank=True), max_length=1000)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    nodes = serializers.IntegerField(default=1, min_value=1, max_value=1024)
    gpus_per_node = serializers.IntegerField(default=0, min_value=0, max_value=1024)
    cpu_per_node = serializers.CharField(required=False, allow_blank=True, max_length=64)
    memory_per_node = serializers.CharField(required=False, allow_blank=True, max_length=64)
    queue = serializers.CharField(max_length=63, help_text="a LocalQueue, or a queue class")
    priority_class = serializers.CharField(required=False, allow_blank=True, max_length=253)
    checkpoint_uri = serializers.CharField(required=False, allow_blank=True, max_length=1024)
    checkpoint_interval_seconds = DurationField(
        required=False, min_value=60, max_value=7 * 24 * 3600
    )
    max_runtime_seconds = DurationField(required=False, min_value=60, max_value=90 * 24 * 3600)
    expected_runtime_seconds = DurationField(
        required=False,
        min_value=1,
        max_value=90 * 24 * 3600,
        help_text="how long it should run; the simulated cluster runs it this long",
    )
    retries = serializers.IntegerField(default=0, min_value=0, max_value=100)
    spot_allowed = serializers.BooleanField(required=False, allow_null=True, default=None)
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    justification = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    training_runtime = serializers.CharField(required=False, allow_blank=True, max_length=253)
    min_nodes = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=1024,
        help_text="kind Job: Kueue may start it with as few nodes (partial admission)",
    )
    topology_required = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=317,
        help_text="a topology level's node label (e.g. topology.berth.dev/rack): all nodes "
        "in one such domain, or it waits",
    )
    topology_preferred = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=317,
        help_text="a topology level's node label: in one such domain if it can, else wider",
    )


class JobEventSerializer(serializers.ModelSerializer):
    # Not the workload event's enum: the timeline also holds Berth's own steps
    # and those the apps above register (approvals).
    type = serializers.CharField(
        help_text="a workload event (created, admitted, preempted, finished, …) or a step of "
        "Berth's (submitted, created-on-cluster, cancelled, approval-…)"
    )

    class Meta:
        model = WorkloadEvent
        fields = ["type", "at", "reason", "message", "details"]


# A job's gate before it may start (today: the approval an urgent-release
# queue requires) belongs to the app that gates, which sits above jobs: it
# registers at start-up how a job's latest gate reads, and documents the
# field's schema (approvals.job_section).
GateView = Callable[[JobRequest], dict[str, Any] | None]
_gate_views: list[GateView] = []


def register_gate_view(view: GateView) -> None:
    if view not in _gate_views:
        _gate_views.append(view)


class GateField(serializers.Field):
    """The job's latest gate, as the registered view reads it; null when none."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, allow_null=True, **kwargs)

    def to_representation(self, job: JobRequest) -> dict[str, Any] | None:
        return next((found for view in _gate_views if (found := view(job))), None)


class JobSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    submitted_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    cpu_per_node = serializers.SerializerMethodField()
    memory_per_node = serializers.SerializerMethodField()
    wait_seconds = serializers.FloatField(read_only=True, allow_null=True)
    gpus = serializers.IntegerField(read_only=True)
    gpu_hours_used = serializers.SerializerMethodField()
    gpu_hours_lost = serializers.SerializerMethodField()
    workload = serializers.SerializerMethodField()
    flavors = serializers.SerializerMethodField()
    approval = GateField(
        help_text="the job's latest approval request (urgent-release queues); null for a job "
        "that needed none"
    )

    class Meta:
        model = JobRequest
        fields = [
            "id", "name", "team", "namespace", "kind", "image", "command", "env", "nodes",
            "gpus_per_node", "gpus", "cpu_per_node", "memory_per_node", "queue_class",
            "local_queue", "cluster_queue", "priority_class", "priority", "checkpoint_uri",
            "checkpoint_interval_seconds", "max_runtime_seconds", "expected_runtime_seconds",
            "retries", "spot_allowed", "labels", "justification", "training_runtime",
            "min_nodes", "topology_required", "topology_preferred", "state",
            "reason", "message",
            "submitted_by", "submitted_at", "created_on_cluster_at", "admitted_at", "started_at",
            "finished_at", "cancelled_at", "wait_seconds", "preemptions", "gpu_hours_used",
            "gpu_hours_lost", "workload", "flavors", "approval", "manifest",
        ]  # fmt: skip
        read_only_fields = fields

    def get_cpu_per_node(self, job: JobRequest) -> str | None:
        return format_canonical("cpu", job.cpu_per_node) if job.cpu_per_node else None

    def get_memory_per_node(self, job: JobRequest) -> str | None:
        return format_canonical("memory", job.memory_per_node) if job.memory_per_node else None

    def get_gpu_hours_used(self, job: JobRequest) -> float:
        return round(job.gpu_seconds_used / 3600, 3)

    def get_gpu_hours_lost(self, job: JobRequest) -> float:
        return round(job.gpu_seconds_lost / 3600, 3)

    def get_workload(self, job: JobRequest) -> str | None:
        return f"{job.workload.namespace}/{job.workload.name}" if job.workload else None

    def get_flavors(self, job: JobRequest) -> dict[str, Any]:
        return dict(job.workload.flavors) if job.workload else {}


class JobListSerializer(JobSerializer):
    """What a list row shows; the detail (``jobs/{id}/``) has everything else."""

    class Meta(JobSerializer.Meta):
        fields = [
            "id", "name", "team", "namespace", "kind", "nodes", "gpus_per_node", "gpus",
            "queue_class", "local_queue", "cluster_queue", "priority_class", "priority", "state",
            "reason", "submitted_by", "submitted_at", "admitted_at", "started_at", "finished_at",
            "wait_seconds", "preemptions", "gpu_hours_used", "gpu_hours_lost",
        ]  # fmt: skip
        read_only_fields = fields
