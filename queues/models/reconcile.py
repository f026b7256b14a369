from __future__ import annotations

from django.conf import settings
from django.db import models


class ReconcileRun(models.Model):
    """One pass of the reconciler: what it found, did and failed to do.

    ``policy_version`` is the newest PolicyChange id it rendered: the cluster
    reflects the policy up to that change once the run succeeded."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        PARTIAL = "partial", "Partial (some objects failed)"
        FAILED = "failed"
        SKIPPED = "skipped", "Skipped (another reconcile was running)"

    class Trigger(models.TextChoices):
        POLICY_CHANGE = "policy-change"
        PERIODIC = "periodic"
        MANUAL = "manual"
        PLAN = "plan", "Plan only (dry run)"
        RECOVERY = "recovery", "Recovery (the sweeper found the cluster behind the policy)"

    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    backend = models.CharField(max_length=32)
    dry_run = models.BooleanField(default=False)
    policy_version = models.BigIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)
    drained = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    drifted = models.PositiveIntegerField(default=0)
    write_calls = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    changes = models.JSONField(default=list, blank=True)
    errors = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"reconcile #{self.pk} {self.status} ({self.trigger})"


class DriftRecord(models.Model):
    """An object Berth manages that someone changed on the cluster by hand; the
    run that found it put Berth's version back."""

    run = models.ForeignKey(ReconcileRun, on_delete=models.CASCADE, related_name="drift")
    detected_at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    fields = models.JSONField(default=list)
    cluster_value = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"drift in {self.kind} {self.name}: {', '.join(self.fields)}"


class AdoptedObject(models.Model):
    """A cluster object Berth did not make that an import took into the policy
    (``manage.py import_kueue --apply``). Reconcile takes it over instead of
    refusing it as someone else's; once taken over it carries Berth's label and
    is Berth's like any other. Kept afterwards as a record of where it came from."""

    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    source = models.CharField(
        max_length=500, help_text="e.g. imported from cluster prod-a by alice"
    )
    imported_at = models.DateTimeField(auto_now_add=True)
    # Field managers of the object when it was imported (from managedFields).
    managers = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "namespace", "name"], name="unique_adopted_object"
            )
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class KueueReading(models.Model):
    """The Kueue objects a worker read from the cluster for the import page: a
    request handler never talks to the cluster, so the page asks for a reading
    (``queues.tasks.read_kueue_cluster``) and plans from what it stored."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cluster = models.CharField(max_length=200, blank=True)
    objects_read = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]

    def __str__(self) -> str:
        return f"reading #{self.pk} of {self.cluster or 'the cluster'}"
