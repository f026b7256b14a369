"""How scattered each flavor's free GPUs are over time: one row per flavor at
each snapshot instant, written with the capacity snapshot (``cluster.gang_fit``)
and thinned like the other snapshots (``cluster.retention``)."""

from __future__ import annotations

from django.db import models


class GangFitSnapshot(models.Model):
    """A topology-aware flavor's free GPUs at one instant, and how much of them a
    gang of whole nodes can use."""

    at = models.DateTimeField(db_index=True)
    flavor = models.CharField(max_length=253)
    nodes = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField()
    free_gpus = models.PositiveIntegerField()
    # Nodes with every GPU free; the free GPUs on nodes partly in use (which a
    # gang of whole nodes cannot use).
    whole_free_nodes = models.PositiveIntegerField()
    stranded_gpus = models.PositiveIntegerField()
    # The most whole nodes one domain holds, per topology level ("" is the
    # whole flavor): {level: nodes}.
    largest = models.JSONField(default=dict)

    class Meta:
        ordering = ["-at", "flavor"]
        constraints = [
            models.UniqueConstraint(fields=["at", "flavor"], name="unique_gang_fit_snapshot")
        ]
        indexes = [models.Index(fields=["flavor", "-at"])]

    def __str__(self) -> str:
        return f"{self.flavor} @ {self.at}: {self.free_gpus} GPUs free"

    @property
    def fragmentation(self) -> float:
        """The share of the free GPUs on nodes partly in use (0 to 1)."""
        return self.stranded_gpus / self.free_gpus if self.free_gpus else 0.0
