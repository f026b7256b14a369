from __future__ import annotations

from django.db import models

from queues.models.base import PolicyObject


class Topology(PolicyObject):
    """A Kueue Topology: how the cluster's nodes nest (block, rack, host), named
    by node labels, widest level first. A ResourceFlavor that names it
    (``topology_name``) makes Kueue place each admitted pod set on that
    flavor's nodes level by level, so a job can ask for all its pods in one
    rack. Kueue fixes the levels once the object exists."""

    name = models.CharField(max_length=253, unique=True)
    description = models.TextField(blank=True)
    # Node-label keys, widest domain first; kubernetes.io/hostname only last.
    levels = models.JSONField(default=list)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "topologies"

    def __str__(self) -> str:
        return self.name
