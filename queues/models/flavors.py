from __future__ import annotations

from django.db import models

from queues.choices import CapacityType
from queues.models.base import PolicyObject


class ResourceFlavor(PolicyObject):
    """A kind of capacity (``h100-ondemand``, ``h100-spot``): which nodes it means
    (labels, taints), which tolerations admitted pods get, and how it is bought."""

    name = models.CharField(max_length=253, unique=True)
    description = models.TextField(blank=True)
    node_labels = models.JSONField(default=dict, blank=True)
    node_taints = models.JSONField(default=list, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    capacity_type = models.CharField(
        max_length=16, choices=CapacityType.choices, default=CapacityType.ON_DEMAND
    )
    topology_name = models.CharField(max_length=253, blank=True)
    # What one GPU-hour on it costs, in BERTH_CURRENCY (queues.prices); null: not
    # priced. Showback charges each hour at the price in force then (its history).
    gpu_hour_price = models.DecimalField(max_digits=11, decimal_places=4, null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
