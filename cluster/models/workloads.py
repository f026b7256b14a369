"""What the cluster did, as Berth records it: workloads, their history, queue
usage over time. Written by sync (``cluster.sync``) only.

Its tables keep the ``jobs_`` names they had before ``jobs/`` was split
(``db_table``), so the split moved no data."""

from __future__ import annotations

from django.db import models

from queues.models import Team


class WorkloadState(models.TextChoices):
    PENDING = "pending"
    QUOTA_RESERVED = "quota-reserved", "Quota reserved (waiting for admission checks)"
    ADMITTED = "admitted"
    EVICTED = "evicted", "Evicted (its job is stopping)"
    FINISHED = "finished"
    FAILED = "failed"
    DEACTIVATED = "deactivated"
    DELETED = "deleted", "Deleted from the cluster"


# What a workload can be while it holds quota or waits for it.
LIVE_STATES = (
    WorkloadState.PENDING,
    WorkloadState.QUOTA_RESERVED,
    WorkloadState.ADMITTED,
    WorkloadState.EVICTED,
)


class WorkloadRecord(models.Model):
    """A Kueue Workload as last seen on the cluster."""

    uid = models.CharField(max_length=64, unique=True)
    namespace = models.CharField(max_length=63, db_index=True)
    name = models.CharField(max_length=253)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="workloads"
    )
    job_kind = models.CharField(max_length=64, blank=True)
    job_name = models.CharField(max_length=253, blank=True)
    local_queue = models.CharField(max_length=63, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True, db_index=True)
    priority = models.IntegerField(default=0)
    priority_class = models.CharField(max_length=253, blank=True)
    # {resource: canonical amount} for the whole workload; per pod set in pod_sets.
    requested = models.JSONField(default=dict)
    pod_sets = models.JSONField(default=list)
    # {podSet: {resource: flavor}} while it holds quota
    flavors = models.JSONField(default=dict, blank=True)
    # {check name: {"state", "lastTransitionTime", "message"}} as the Workload's
    # status.admissionChecks last showed them; the approval controller reads it.
    admission_checks = models.JSONField(default=dict, blank=True)
    state = models.CharField(
        max_length=16, choices=WorkloadState.choices, default=WorkloadState.PENDING, db_index=True
    )
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(db_index=True)
    # When Kueue reserved the quota it holds now (QuotaReserved's transition).
    reserved_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    evictions = models.PositiveIntegerField(default=0)
    resource_version = models.CharField(max_length=32, blank=True)
    synced_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "jobs_workloadrecord"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["cluster_queue", "state"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.state})"

    @property
    def gpus(self) -> int:
        return int(self.requested.get("nvidia.com/gpu", 0))


class EventType(models.TextChoices):
    CREATED = "created"
    QUOTA_RESERVED = "quota-reserved"
    CHECK_STATE = "check-state", "Admission check state changed"
    ADMITTED = "admitted"
    EVICTED = "evicted"
    PREEMPTED = "preempted"
    REQUEUED = "requeued"
    FINISHED = "finished"
    FAILED = "failed"
    DEACTIVATED = "deactivated"
    DELETED = "deleted"


# Within one second, the order transitions happen in (sync records several at
# once); the others after these.
TRANSITION_ORDER: dict[str, int] = {
    EventType.CREATED: 0,
    EventType.EVICTED: 1,
    EventType.PREEMPTED: 2,
    EventType.REQUEUED: 3,
    EventType.QUOTA_RESERVED: 4,
    EventType.CHECK_STATE: 5,
    EventType.ADMITTED: 6,
    EventType.FINISHED: 7,
    EventType.FAILED: 7,
}


class WorkloadEvent(models.Model):
    """Append-only history of a workload, from its conditions' transitions.
    Unique on (workload, type, at, reason), so replaying the same watch events
    adds nothing."""

    workload = models.ForeignKey(WorkloadRecord, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=16, choices=EventType.choices)
    at = models.DateTimeField(db_index=True)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "jobs_workloadevent"
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "type", "at", "reason"], name="unique_workload_event"
            )
        ]

    def __str__(self) -> str:
        return f"{self.workload} {self.type} at {self.at:%Y-%m-%d %H:%M:%S}"


class QueueSnapshot(models.Model):
    """Periodic usage of one ClusterQueue × flavor × resource, for history charts."""

    at = models.DateTimeField(db_index=True)
    cluster_queue = models.CharField(max_length=253)
    flavor = models.CharField(max_length=253)
    resource = models.CharField(max_length=317)
    nominal = models.BigIntegerField(default=0)
    usage = models.BigIntegerField(default=0)
    borrowed = models.BigIntegerField(default=0)
    lent = models.BigIntegerField(default=0)
    pending_workloads = models.PositiveIntegerField(default=0)
    admitted_workloads = models.PositiveIntegerField(default=0)
    # GPU rows: GPUs its admitted workloads kept busy (None when nobody measures it).
    utilised = models.FloatField(null=True, blank=True)

    class Meta:
        db_table = "jobs_queuesnapshot"
        ordering = ["-at", "cluster_queue", "flavor", "resource"]
        constraints = [
            models.UniqueConstraint(
                fields=["at", "cluster_queue", "flavor", "resource"], name="unique_queue_snapshot"
            )
        ]
        indexes = [models.Index(fields=["cluster_queue", "-at"])]

    def __str__(self) -> str:
        return f"{self.cluster_queue}/{self.flavor}/{self.resource} @ {self.at}"


class QueueStatus(models.Model):
    """The current status of each ClusterQueue and LocalQueue, as Kueue reports
    it (the snapshots keep the history)."""

    kind = models.CharField(max_length=16)  # ClusterQueue or LocalQueue
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    cluster_queue = models.CharField(max_length=253, blank=True)
    pending_workloads = models.PositiveIntegerField(default=0)
    reserving_workloads = models.PositiveIntegerField(default=0)
    admitted_workloads = models.PositiveIntegerField(default=0)
    status = models.JSONField(default=dict)
    observed_at = models.DateTimeField()

    class Meta:
        db_table = "jobs_queuestatus"
        ordering = ["kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "namespace", "name"], name="unique_queue_status"
            )
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class ObservedNode(models.Model):
    """A node as the last sync saw it: the labels topology-aware scheduling
    places pods by, and its allocatable resources (canonical units)."""

    name = models.CharField(max_length=253, unique=True)
    labels = models.JSONField(default=dict)
    allocatable = models.JSONField(default=dict)
    changed_at = models.DateTimeField()

    class Meta:
        db_table = "jobs_observednode"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CapacitySnapshot(models.Model):
    """Allocatable resources of the nodes each flavor selects, over time."""

    at = models.DateTimeField(db_index=True)
    flavor = models.CharField(max_length=253)
    resource = models.CharField(max_length=317)
    allocatable = models.BigIntegerField()
    # What one node can give a pod set: a job asking more per node never starts.
    largest_node = models.BigIntegerField(default=0)
    nodes = models.PositiveIntegerField()
    # GPUs busy on average (GPU rows only; None when nobody measures it), and
    # who measured it: "prometheus" (DCGM) or "simulated".
    utilised = models.FloatField(null=True, blank=True)
    utilisation_source = models.CharField(max_length=16, blank=True)
    # What the ClusterQueues held of it at the same instant (their usage, summed).
    allocated = models.BigIntegerField(default=0)

    class Meta:
        db_table = "jobs_capacitysnapshot"
        ordering = ["-at", "flavor", "resource"]
        constraints = [
            models.UniqueConstraint(
                fields=["at", "flavor", "resource"], name="unique_capacity_snapshot"
            )
        ]

    def __str__(self) -> str:
        return f"{self.flavor}/{self.resource}: {self.allocatable} @ {self.at}"


class SyncCursor(models.Model):
    """Where a watch of one kind stands: resume from here, relist on 410."""

    kind = models.CharField(max_length=64, unique=True)
    resource_version = models.CharField(max_length=32, blank=True)
    listed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "jobs_synccursor"

    def __str__(self) -> str:
        return f"{self.kind} @ {self.resource_version}"
