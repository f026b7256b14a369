from __future__ import annotations

from django.db import models

from queues.models.base import PolicyObject, QueueingPolicy


class WorkloadPriorityClass(PolicyObject):
    """A priority jobs name with ``kueue.x-k8s.io/priority-class``."""

    name = models.CharField(max_length=253, unique=True)
    value = models.IntegerField(help_text="Higher wins; 32-bit signed integer")
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["-value", "name"]
        verbose_name = "workload priority class"
        verbose_name_plural = "workload priority classes"

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"


class QueueClass(QueueingPolicy, PolicyObject):
    """A template for how a ClusterQueue behaves and what jobs in it must carry.

    A ClusterQueue of this class takes the strategy and preemption defaults below
    unless it sets its own; the job rules (checkpoint, approval, gang, limits) are
    enforced on submission.
    """

    name = models.CharField(max_length=63, unique=True)
    description = models.TextField(blank=True)
    default_priority_class = models.ForeignKey(
        WorkloadPriorityClass,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="queue_classes",
    )
    requires_checkpoint = models.BooleanField(default=False)
    requires_approval = models.BooleanField(default=False)
    gang_required = models.BooleanField(default=False)
    spot_allowed = models.BooleanField(default=False)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_retries = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "queue classes"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def policy_fields(cls) -> list[models.Field]:
        """The fields an admin writes, in declaration order: the one list the
        defaults, history snapshots, admin columns and filters are derived from
        (the API serializer is checked against it by a test)."""
        return [f for f in cls._meta.concrete_fields if f.editable and not f.primary_key]

    @classmethod
    def rule_flags(cls) -> list[str]:
        """The yes/no job rules (checkpoint, approval, gang, spot)."""
        return [f.name for f in cls.policy_fields() if isinstance(f, models.BooleanField)]
