from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q

from queues.choices import (
    AdmissionMode,
    FungibilityAction,
    FungibilityPreference,
    StopPolicy,
)
from queues.models.base import PolicyObject, QueueingPolicy
from queues.models.classes import QueueClass, WorkloadPriorityClass
from queues.models.cohorts import Cohort
from queues.models.flavors import ResourceFlavor
from queues.models.teams import Team, TeamNamespace


class ClusterQueue(QueueingPolicy, PolicyObject):
    """Quota per flavor × resource and the admission behaviour of one queue.

    Owned by a team (then only the team's namespaces may use it) or shared by all
    teams when ``team`` is empty. Its quotas live in ``Quota`` rows.
    """

    name = models.CharField(max_length=253, unique=True)
    description = models.TextField(blank=True)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.PROTECT, related_name="cluster_queues"
    )
    cohort = models.ForeignKey(
        Cohort, null=True, blank=True, on_delete=models.PROTECT, related_name="cluster_queues"
    )
    queue_class = models.ForeignKey(
        QueueClass, null=True, blank=True, on_delete=models.PROTECT, related_name="cluster_queues"
    )
    default_priority_class = models.ForeignKey(
        WorkloadPriorityClass,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="cluster_queues",
        help_text="Priority for jobs that name none; empty means the queue class's default",
    )
    borrow_within_cohort_max_priority_threshold = models.IntegerField(null=True, blank=True)
    fair_sharing_weight = models.DecimalField(max_digits=12, decimal_places=3, default=Decimal(1))
    when_can_borrow = models.CharField(
        max_length=32, choices=FungibilityAction.choices, default=FungibilityAction.MAY_STOP_SEARCH
    )
    when_can_preempt = models.CharField(
        max_length=32, choices=FungibilityAction.choices, default=FungibilityAction.TRY_NEXT_FLAVOR
    )
    flavor_fungibility_preference = models.CharField(
        max_length=32, choices=FungibilityPreference.choices, default="", blank=True
    )
    stop_policy = models.CharField(
        max_length=16, choices=StopPolicy.choices, default=StopPolicy.NONE
    )
    # Kueue's spec.admissionScope.admissionMode; empty leaves the scope out.
    admission_mode = models.CharField(
        max_length=32, choices=AdmissionMode.choices, default="", blank=True
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Quota(models.Model):
    """One flavor × resource entry of a ClusterQueue's or a Cohort's resource groups.

    Kueue nests quotas as groups → flavors → resources and requires every flavor
    of a group to list the group's covered resources in the same order, so one
    row per (owner, flavor, resource) with the three positions keeps the whole
    structure, and lets Postgres answer "who uses flavor X" directly. Amounts are
    canonical integers (milli-CPU, bytes, counts).
    """

    cluster_queue = models.ForeignKey(
        ClusterQueue, null=True, blank=True, on_delete=models.CASCADE, related_name="quotas"
    )
    cohort = models.ForeignKey(
        Cohort, null=True, blank=True, on_delete=models.CASCADE, related_name="quotas"
    )
    group_index = models.PositiveSmallIntegerField()
    flavor_index = models.PositiveSmallIntegerField()
    resource_index = models.PositiveSmallIntegerField()
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.PROTECT, related_name="quotas")
    # A qualified name: 253-character DNS prefix, "/", 63-character name.
    resource = models.CharField(max_length=317)
    nominal_quota = models.BigIntegerField()
    borrowing_limit = models.BigIntegerField(null=True, blank=True)
    lending_limit = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["group_index", "flavor_index", "resource_index"]
        constraints = [
            models.CheckConstraint(
                condition=Q(cluster_queue__isnull=False, cohort__isnull=True)
                | Q(cluster_queue__isnull=True, cohort__isnull=False),
                name="quota_has_one_owner",
            ),
            models.CheckConstraint(
                condition=Q(nominal_quota__gte=0)
                & (Q(borrowing_limit__isnull=True) | Q(borrowing_limit__gte=0))
                & (Q(lending_limit__isnull=True) | Q(lending_limit__gte=0)),
                name="quota_not_negative",
            ),
            models.UniqueConstraint(
                fields=["cluster_queue", "flavor", "resource"], name="unique_queue_flavor_resource"
            ),
            models.UniqueConstraint(
                fields=["cohort", "flavor", "resource"], name="unique_cohort_flavor_resource"
            ),
        ]

    def __str__(self) -> str:
        owner = self.cluster_queue or self.cohort
        return f"{owner}/{self.flavor_id}/{self.resource}"


class LocalQueue(PolicyObject):
    """The namespaced entry point jobs name with ``kueue.x-k8s.io/queue-name``.

    Berth generates one per ClusterQueue in each namespace that may use it
    (``generated``); an admin may add others or repoint one, which makes it manual.
    """

    namespace = models.ForeignKey(
        TeamNamespace, on_delete=models.PROTECT, related_name="local_queues"
    )
    name = models.CharField(max_length=63)
    cluster_queue = models.ForeignKey(
        ClusterQueue, on_delete=models.PROTECT, related_name="local_queues"
    )
    generated = models.BooleanField(default=False)
    stop_policy = models.CharField(
        max_length=16, choices=StopPolicy.choices, default=StopPolicy.NONE
    )

    class Meta:
        ordering = ["namespace__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="unique_local_queue_name")
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.name}"
