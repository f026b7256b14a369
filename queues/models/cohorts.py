from __future__ import annotations

from decimal import Decimal

from django.db import models

from queues.models.base import PolicyObject


class Cohort(PolicyObject):
    """A node of the lending tree: ClusterQueues (and child cohorts) under one
    cohort borrow each other's unused quota. A cohort may hold quota of its own."""

    name = models.CharField(max_length=253, unique=True)
    description = models.TextField(blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    fair_sharing_weight = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal(1))

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
