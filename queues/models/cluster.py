from __future__ import annotations

from django.db import models


class SimulatedObject(models.Model):
    """An object stored in Berth's embedded simulated cluster (the default
    backend), so its state survives a restart of Berth."""

    api_version = models.CharField(max_length=128)
    kind = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=36)
    resource_version = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    body = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "namespace", "name"], name="unique_simulated_object"
            )
        ]
        indexes = [models.Index(fields=["kind", "resource_version"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


class SimulatedEvent(models.Model):
    """The simulated cluster's change log: its id is the resourceVersion, and
    watches replay it. Old entries are pruned; a watch from before the oldest
    kept entry gets 410 Gone, as from a real API server."""

    kind = models.CharField(max_length=64, db_index=True)
    event_type = models.CharField(max_length=16)
    body = models.JSONField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.event_type} {self.kind} @{self.pk}"


class SimulatedClock(models.Model):
    """When the simulated cluster last stepped (epoch seconds), so the load
    generator covers each stretch of time once, across restarts. One row."""

    last_tick = models.FloatField(null=True, blank=True)

    def __str__(self) -> str:
        return f"simulated cluster, last step at {self.last_tick}"
